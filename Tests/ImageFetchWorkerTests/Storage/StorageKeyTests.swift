import Testing

@testable import ImageFetchWorker

@Suite struct StorageKeyTests {
    @Test func onlyLowercaseHexIsADigest() {
        #expect(StorageKey.isDigest(String(repeating: "0123456789abcdef", count: 4)))
        #expect(StorageKey.isDigest("ab"))
        for text in ["", "AB", "ab/..", "../../x", "0g", "ab ", "é", String(repeating: "a", count: 63) + "G"] {
            #expect(!StorageKey.isDigest(text), "\(text)")
        }
    }

    @Test func contentAddressedKey() {
        let sha = "ab" + String(repeating: "0", count: 62)
        #expect(StorageKey.contentAddressed(sha256: sha, format: .png) == "ab/\(sha).png")
        #expect(StorageKey.contentAddressed(sha256: sha, format: .jpeg) == "ab/\(sha).jpg")
        #expect(StorageKey.contentAddressed(sha256: sha, format: .tiff) == "ab/\(sha).tif")
    }

    @Test(arguments: [
        ("a.png", "a.png"),
        ("cats/2024/tabby.jpg", "cats/2024/tabby.jpg"),
        ("/abs", "abs"),
        ("///abs/x.gif", "abs/x.gif"),
        ("a..b/c...d", "a..b/c...d"),
        (".hidden", ".hidden"),
        ("spaces are fine.png", "spaces are fine.png"),
        ("ünïcödé/画像.webp", "ünïcödé/画像.webp"),
    ])
    func usableKeys(_ hint: String, _ expected: String) {
        #expect(StorageKey.sanitize(hint) == expected)
    }

    @Test(arguments: [
        "../x", "a/../b", "a/..", "..", "./a", "a/./b", "a//b", "a/", "", "/", "//",
        "a\u{0}b", "a\u{1F}b", "a\u{7F}b", "a\nb", "a\u{85}b", "a\\b", "..\\x",
        String(repeating: "x", count: 256), String(repeating: "a/", count: 600) + "a",
    ])
    func hostileKeys(_ hint: String) {
        #expect(StorageKey.sanitize(hint) == nil)
    }

    /// Segments are told apart by their bytes, as the file system and S3 see them. A "/" followed
    /// by a combining mark or a joiner is one Character with it, so a split on Characters saw no
    /// ".." segment in these, and the file sink wrote one folder above its root.
    @Test(arguments: ["../\u{301}escaped/x.png", "a/../\u{200D}b", "../\u{20E3}"])
    func keysThatClimbByTheirBytes(_ hint: String) {
        #expect(StorageKey.sanitize(hint) == nil)
    }

    @Test func segmentsThatStartWithACombiningMarkAreKept() {
        #expect(StorageKey.sanitize("a/\u{301}b/c.png") == "a/\u{301}b/c.png")
        #expect(StorageKey.sanitize("/\u{301}x") == "\u{301}x")
    }

    @Test func longestSegmentIsAccepted() {
        let segment = String(repeating: "x", count: StorageKey.maxSegmentLength)
        #expect(StorageKey.sanitize(segment) == segment)
    }

    @Test func requestFallsBackToContentAddressedKey() {
        let sha = String(repeating: "c", count: 64)
        let info = ImageInfo(format: .gif, width: 1, height: 1)
        func request(_ hint: String?) -> StorageRequest {
            StorageRequest(body: [1], sha256: sha, info: info, keyHint: hint, jobID: "j", sourceURL: "http://x/")
        }
        #expect(request(nil).resolvedKey == "cc/\(sha).gif")
        #expect(request("../etc/passwd").resolvedKey == "cc/\(sha).gif")
        #expect(request("/a/b.gif").resolvedKey == "a/b.gif")
    }

    /// Content addresses belong to the bytes they name: a key shaped like one is used only when it
    /// is this image's own, so no job can put bytes where another image's result points (S3 and
    /// file sinks both store under ``StorageRequest/resolvedKey``).
    @Test func keysShapedLikeAContentAddressAreReserved() {
        let sha = String(repeating: "c", count: 64)
        let other = "ab" + String(repeating: "0", count: 62)
        let info = ImageInfo(format: .gif, width: 1, height: 1)
        func request(_ hint: String?) -> StorageRequest {
            StorageRequest(body: [1], sha256: sha, info: info, keyHint: hint, jobID: "j", sourceURL: "http://x/")
        }
        let own = "cc/\(sha).gif"
        #expect(request(own).resolved.key == own)
        #expect(request(own).resolved.isContentAddress)
        for hint in ["ab/\(other).png", "/ab/\(other).gif", "ab/\(other)", "ab/\(other).png/x", "cc/\(sha).png"] {
            #expect(request(hint).resolvedKey == own, "\(hint)")
        }
        // A file named as a content address's folder: every image whose digest starts so would
        // fail to store (ENOTDIR) until someone removed it.
        for hint in ["17", "ab", "/ff", "cc"] {
            #expect(request(hint).resolvedKey == own, "\(hint)")
        }
        // On a case-insensitive file system (SMB, casefold ext4) these are another image's file.
        for hint in ["AB/\(other.uppercased()).PNG", "Ab/\(other).png", "CC/\(sha.uppercased()).GIF"] {
            #expect(request(hint).resolvedKey == own, "\(hint)")
        }
        // Not the content-address shape: usable as before.
        for hint in [
            "x/ab/\(other).png", "ab/\(other.prefix(63)).png", "abc/\(other).png", "ab/cat.png", "abc", "a", "1g",
        ] {
            #expect(request(hint).resolvedKey == hint, "\(hint)")
        }
    }
}
