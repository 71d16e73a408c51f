import Foundation
import Testing

@testable import ImageFetchWorker

/// The corpus of scripts/image-corpus.sh: files made by real encoders (and altered as odd files
/// are), PngSuite files, truncations, and what Pillow with pillow-heif said of each. Made once per
/// test run, into the checkout's `.run/` (ignored by git), which the script empties first: in the
/// system's temporary directory each run left 27 MB behind. A missing tool or a failing encoder
/// makes it an error, so the tests fail.
private let corpus: Result<(directory: URL, expected: Data), CorpusError> = {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()
    let directory = root.appendingPathComponent(".run/image-corpus")
    let process = Process()
    process.executableURL = root.appendingPathComponent("scripts/image-corpus.sh")
    process.arguments = [directory.path]
    do {
        try process.run()
        process.waitUntilExit()
    } catch {
        return .failure(CorpusError(message: "scripts/image-corpus.sh did not start: \(error)"))
    }
    guard process.terminationStatus == 0 else {
        return .failure(CorpusError(message: "scripts/image-corpus.sh exited with \(process.terminationStatus)"))
    }
    guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent("expected.json").path) else {
        return .failure(CorpusError(message: "no expected.json in \(directory.path)"))
    }
    return .success((directory, data))
}()

private struct CorpusError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

private func corpusFiles() throws -> [(name: String, bytes: [UInt8], reference: [String: Any])] {
    let (directory, data) = try corpus.get()
    guard let expected = try JSONSerialization.jsonObject(with: data) as? [String: [String: Any]] else {
        throw CorpusError(message: "expected.json is not an object of objects")
    }
    return try expected.keys.sorted().map { name in
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return (name, [UInt8](data), expected[name]!)
    }
}

/// Checks what must hold for any input: a whole body never needs more data, an image has positive
/// dimensions, and every prefix either needs more data or agrees with the whole body.
private func checkAgainstPrefixes(_ name: String, _ bytes: [UInt8], cuts: Int) {
    let whole = ImageSniffer.inspect(bytes)
    #expect(whole != .needMoreData, "\(name)")
    if case .image(let info) = whole { #expect(info.width > 0 && info.height > 0, "\(name)") }
    let step = max(1, bytes.count / cuts)
    for length in stride(from: 0, through: bytes.count, by: step) {
        let partial = Array(bytes.prefix(length)).withUnsafeBytes { ImageSniffer.inspect($0, isComplete: false) }
        switch (partial, whole) {
        case (.needMoreData, _):
            break
        case (.image(let p), .image(let w)):
            #expect(p.isConsistent(withWhole: w), "\(name) prefix \(length): \(p) vs \(w)")
        default:
            #expect(partial == whole, "\(name) prefix \(length): \(partial) vs \(whole)")
        }
    }
}

@Suite(.serialized) struct ImageSnifferDifferentialTests {
    /// Every file Pillow opens in a format the worker claims gets the same format and size (and
    /// frame count and EXIF orientation, where both tell); every file in a format it does not claim
    /// is `notAnImage`; every file Pillow refuses leaves the sniffer consistent. Prints the table
    /// that docs/image-formats.md quotes.
    @Test func agreesWithPillow() throws {
        var table: [String: Row] = [:]
        var disagreements: [String] = []
        var otherFacts: [String] = []
        let files = try corpusFiles()
        // Which originals the structure walk accepts: every cut of one of them must be refused.
        var complete: Set<String> = []
        for (name, bytes, _) in files where !name.hasPrefix("truncated") {
            if case .image(let info) = ImageSniffer.inspect(bytes),
                ImageSniffer.checkStructure(bytes, format: info.format) == nil
            {
                complete.insert(name)
            }
        }
        for (name, bytes, reference) in files {
            let family = String(name.split(separator: "-").first { !$0.hasPrefix("truncated") } ?? "")
            let answer = ImageSniffer.inspect(bytes)
            checkAgainstPrefixes(name, bytes, cuts: 64)
            var row = table[family] ?? Row()
            row.files += 1
            defer { table[family] = row }
            // The structure walk: what the worker answers for the whole body.
            var walked: StructureProblem?
            if case .image(let info) = answer { walked = ImageSniffer.checkStructure(bytes, format: info.format) }
            let accepted: Bool
            if case .image = answer { accepted = walked == nil } else { accepted = false }
            if reference["decoded"] as? Bool == true, reference["format"] is String {
                row.decoded += 1
                if accepted {
                    row.decodedAccepted += 1
                } else if walked == .corrupt(reason: "bad PNG chunk CRC") {
                    // Pillow does not check an IDAT's CRC; libpng refuses it, and so does the worker.
                    row.refusedByCRC += 1
                } else {
                    disagreements.append("\(name): Pillow decodes it, but \(walked.map { "\($0)" } ?? "\(answer)")")
                }
            } else if reference["format"] is String || reference["error"] != nil {
                row.undecodable += 1
                if !accepted { row.undecodableRefused += 1 }
            }
            if name.hasPrefix("truncated") {
                let original = String(name.drop { $0 != "-" }.dropFirst())
                if complete.contains(original) {
                    row.cutOfComplete += 1
                    if accepted {
                        disagreements.append("\(name): a cut of a complete file was accepted")
                    } else {
                        row.cutRefused += 1
                    }
                }
            }
            guard reference["error"] == nil else {
                row.refused += 1
                switch answer {
                case .notAnImage:
                    row.alsoRefused += 1
                case .image(let info):
                    // Accepted: ImageMagick, where it reads the file, must agree (it names an AVIF
                    // read through libheif HEIC). Otherwise the header is valid and the rest is not,
                    // which the worker does not look at (docs/image-formats.md).
                    guard let magick = reference["identify"] as? [String: Any] else { break }
                    let format = magick["format"] as? String
                    let size = (magick["width"] as? Int, magick["height"] as? Int)
                    let sameFormat = format == info.format.rawValue || (format == "heic" && info.format == .avif)
                    let sameSize = size == (info.width, info.height) || size == (info.displayWidth, info.displayHeight)
                    if !(sameFormat && sameSize) { disagreements.append("\(name): ImageMagick \(magick) but \(info)") }
                case .needMoreData:
                    break
                }
                continue
            }
            row.opened += 1
            guard let format = reference["format"] as? String else {
                // Pillow opened a format the worker does not claim.
                if case .notAnImage = answer { row.agreed += 1 } else { disagreements.append("\(name): \(answer)") }
                continue
            }
            guard case .image(let info) = answer else {
                disagreements.append("\(name): Pillow \(format) but \(answer)")
                continue
            }
            let width = reference["width"] as? Int, height = reference["height"] as? Int
            var same = info.format.rawValue == format
            // Pillow grows a GIF's size to its first frame's extent; the worker reports the logical
            // screen and bounds the grown canvas (ImageInfo.canvasWidth) by fetch.max_pixels.
            // pillow-heif (libheif) and Pillow's libtiff path report a HEIC's or TIFF's size turned
            // upright: the worker's display size.
            let upright = info.format == .heic || info.format == .tiff
            same =
                same
                && ((upright ? (info.displayWidth, info.displayHeight) : (info.width, info.height)) == (width, height)
                    || (info.format == .gif && info.canvasWidth == width && info.canvasHeight == height))
            if let frames = info.frames, let pillowFrames = reference["frames"] as? Int {
                same = same && frames == pillowFrames
            }
            // The reference leaves out orientation 1 (no turn). pillow-heif tells the orientation
            // only of files whose EXIF had one (it moves it into irot/imir when writing).
            if let orientation = reference["orientation"] as? Int {
                same = same && info.orientation == orientation
            } else if info.format != .heic {
                same = same && (info.orientation ?? 1) == 1
            }
            let sameSize =
                (info.width, info.height) == (width, height)
                || (info.displayWidth, info.displayHeight) == (width, height)
            if !same, name.hasPrefix("pillow."), info.format.rawValue == format, sameSize {
                // Pillow's own test images: the format and size must agree; the other facts (APNG
                // frames with a default image, MPO frames, XMP orientation) are reported, not required.
                otherFacts.append("\(name): Pillow \(reference) but \(info)")
                row.agreed += 1
            } else if same {
                row.agreed += 1
            } else {
                disagreements.append("\(name): Pillow \(reference) but \(info)")
            }
        }
        print(
            "| format | files | opened by Pillow | same format and size | refused by Pillow "
                + "| also refused by the sniffer "
                + "| decoded by Pillow | accepted whole | refused by a chunk CRC | not decoded by Pillow | refused whole "
                + "| cuts of complete files | refused |")
        print("|" + String(repeating: " --- |", count: 13))
        var all = Row()
        for (family, row) in table.sorted(by: { $0.key < $1.key }) {
            print("| \(family) | \(row.cells) |")
            all.add(row)
        }
        print("| **all** | \(all.cells) |")
        print("\(otherFacts.count) of Pillow's test images agree on format and size but not on other facts:")
        for line in otherFacts { print("  \(line)") }
        #expect(
            disagreements.isEmpty, "\(disagreements.count) disagreements:\n\(disagreements.joined(separator: "\n"))")
        #expect(all.opened > 100, "too few files opened by the reference")
    }

    /// `image.verify = decode`: every file Pillow decodes in full (every frame, `Image.load()`) is
    /// accepted with Pillow's format and size, and every file it cannot decode is refused; BMP,
    /// which libvips does not decode here, keeps the structure walk's answer. Prints the table that
    /// docs/image-formats.md quotes, and the disagreements, which fail the test.
    @Test func decodeModeAgreesWithPillow() throws {
        var table: [String: DecodeRow] = [:]
        var disagreements: [String] = []
        var documented: [String] = []
        for (name, bytes, reference) in try corpusFiles() {
            let family = String(name.split(separator: "-").first { !$0.hasPrefix("truncated") } ?? "")
            guard reference["error"] != nil || reference["format"] is String else { continue }
            var row = table[family] ?? DecodeRow()
            defer { table[family] = row }
            let answer = Worker.checkImage(bytes, maxPixels: WorkerConfiguration().fetch.maxPixels, verify: .decode)
            let structureOnly = (try? answer.get()).map { $0.decoded == nil } ?? false
            if structureOnly { row.structureOnly += 1 }
            guard reference["decoded"] as? Bool == true, let format = reference["format"] as? String else {
                row.undecodable += 1
                switch answer {
                case .failure: row.refused += 1
                case .success(let info) where info.decoded == nil: row.undecodableStructureOnly += 1
                case .success(let info):
                    let line =
                        "\(name): Pillow cannot decode it, libvips does: "
                        + "\(info.format) \(info.width)×\(info.height)"
                    if decodeDifferences.contains(where: { name.hasSuffix($0.key) }) {
                        row.documented += 1
                        documented.append(line)
                    } else {
                        disagreements.append(line)
                    }
                }
                continue
            }
            row.decodedByPillow += 1
            switch answer {
            case .failure(let error):
                let line = "\(name): Pillow decodes it, but \(error.code.rawValue): \(error.message)"
                if decodeDifferences.contains(where: { name.hasSuffix($0.key) }) {
                    row.documented += 1
                    documented.append(line)
                } else {
                    disagreements.append(line)
                }
            case .success(let info):
                // Pillow's size is the stored one, but pillow-heif's and Pillow's libtiff path's are
                // turned upright, and Pillow grows a GIF to its first frame (as in agreesWithPillow).
                let width = reference["width"] as? Int, height = reference["height"] as? Int
                let sizes = [
                    (info.width, info.height), (info.displayWidth, info.displayHeight),
                    (info.canvasWidth ?? info.width, info.canvasHeight ?? info.height),
                ]
                guard info.format.rawValue == format, sizes.contains(where: { $0 == (width, height) }) else {
                    disagreements.append("\(name): Pillow \(format) \(width ?? 0)×\(height ?? 0) but \(info)")
                    continue
                }
                row.accepted += 1
                if let decoded = info.decoded {
                    // libnsgif, like Pillow, grows a GIF to a frame beyond its logical screen.
                    let canvas = (info.canvasWidth ?? info.displayWidth, info.canvasHeight ?? info.displayHeight)
                    if (decoded.width, decoded.height) == (info.displayWidth, info.displayHeight)
                        || (decoded.width, decoded.height) == canvas
                    {
                        row.sameUprightSize += 1
                    } else {
                        disagreements.append(
                            "\(name): decoded \(decoded.width)×\(decoded.height), "
                                + "headers upright \(info.displayWidth)×\(info.displayHeight)")
                    }
                }
            }
        }
        print(
            "| format | decoded by Pillow | accepted, same format and size | decoded size = header's upright size "
                + "| not decoded by Pillow | refused | accepted by the structure walk alone (BMP) "
                + "| documented differences |")
        print("|" + String(repeating: " --- |", count: 8))
        var all = DecodeRow()
        for (family, row) in table.sorted(by: { $0.key < $1.key }) {
            print("| \(family) | \(row.cells) |")
            all.add(row)
        }
        print("| **all** | \(all.cells) |")
        print("\(all.structureOnly) files accepted without a decode (BMP)")
        print("\(documented.count) documented differences (decodeDifferences):")
        for line in documented { print("  \(line)") }
        for line in disagreements { print("  \(line)") }
        #expect(
            disagreements.isEmpty, "\(disagreements.count) disagreements:\n\(disagreements.joined(separator: "\n"))")
        #expect(all.decodedByPillow > 100, "too few files decoded by the reference")
    }

    /// Truncation, flipped bytes and inflated sizes on every corpus file: no trap, and the answers
    /// stay consistent; every cut of a file the structure walk accepts is refused by it.
    @Test func mutatedCorpusFilesStaySafe() throws {
        var rng = SplitMix64(state: 0x1F_2E3D)
        var cuts = 0, flips = 0, flipsCaught = 0
        for (name, original, _) in try corpusFiles() where !name.hasPrefix("truncated") {
            guard !original.isEmpty else { continue }
            // A file the walk accepts and that needs its last byte: every cut of it must be refused.
            // Files with bytes after their end (an MPO's second image after the first one's EOI, a
            // TIFF's SubIFD the walk does not follow) may lose those.
            var format: ImageFormat?
            if case .image(let info) = ImageSniffer.inspect(original),
                ImageSniffer.checkStructure(original, format: info.format) == nil
            {
                format = info.format
            }
            let needsItsEnd = format.map { ImageSniffer.checkStructure(Array(original.dropLast()), format: $0) != nil }
            for round in 0..<24 {
                var bytes = original
                // Mutate the first 512 bytes more often: the headers live there.
                let span = UInt64(round % 2 == 0 ? min(512, bytes.count) : bytes.count)
                switch round % 3 {
                case 0:  // truncate
                    bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count))))
                case 1:  // flip bytes
                    for _ in 0..<(1 + Int(rng.next() % 4)) {
                        bytes[Int(rng.next() % span)] ^= UInt8(truncatingIfNeeded: 1 | rng.next())
                    }
                default:  // inflate a 16- or 32-bit field
                    let at = Int(rng.next() % span)
                    let extreme: [UInt8] = [
                        [0xFF, 0xFF, 0xFF, 0xFF], [0x7F, 0xFF, 0xFF, 0xFF], [0, 0, 0xFF, 0xFF],
                        [0x80, 0, 0, 0],
                    ][Int(rng.next() % 4)]
                    for i in 0..<4 where at + i < bytes.count { bytes[at + i] = extreme[i] }
                }
                checkAgainstPrefixes("\(name) round \(round)", bytes, cuts: 8)
                guard let format else { continue }
                let walked = ImageSniffer.checkStructure(bytes, format: format)
                if bytes.count < original.count {
                    guard needsItsEnd == true else { continue }
                    cuts += 1
                    #expect(walked != nil, "\(name) round \(round): a cut at \(bytes.count) was accepted")
                } else if bytes != original {
                    flips += 1
                    let answered = ImageSniffer.inspect(bytes)
                    if walked != nil || answered != ImageSniffer.inspect(original) { flipsCaught += 1 }
                }
            }
        }
        print(
            "mutations of complete files: \(cuts) cuts, all refused; \(flips) flips or inflated fields, "
                + "\(flipsCaught) refused or answered differently")
    }
}

/// One row of the agreement table.
private struct Row {
    var files = 0, opened = 0, agreed = 0, refused = 0, alsoRefused = 0
    var decoded = 0, decodedAccepted = 0, refusedByCRC = 0, undecodable = 0, undecodableRefused = 0
    var cutOfComplete = 0, cutRefused = 0

    var cells: String {
        [
            files, opened, agreed, refused, alsoRefused, decoded, decodedAccepted, refusedByCRC, undecodable,
            undecodableRefused, cutOfComplete, cutRefused,
        ].map(String.init).joined(separator: " | ")
    }

    mutating func add(_ row: Row) {
        files += row.files
        opened += row.opened
        agreed += row.agreed
        refused += row.refused
        alsoRefused += row.alsoRefused
        decoded += row.decoded
        decodedAccepted += row.decodedAccepted
        refusedByCRC += row.refusedByCRC
        undecodable += row.undecodable
        undecodableRefused += row.undecodableRefused
        cutOfComplete += row.cutOfComplete
        cutRefused += row.cutRefused
    }
}

/// Where libvips and Pillow differ on a corpus file, and why (docs/image-formats.md, "Agreement in
/// decode mode"): by the end of the file's name. Any other difference fails the test.
private let decodeDifferences: [String: String] = [
    // Pillow decodes, the worker refuses.
    "pngsuite-xcsn0g01.png": "a wrong IDAT CRC: libpng and the structure walk refuse it, Pillow does not check it",
    "10ct_32bit_128.tiff": "libtiff through libvips 8.14: bad seek",
    "12bit.cropped.tif": "libvips 8.14 reads no 12-bit samples",
    "old-style-jpeg-compression.tif": "libvips 8.14: old-style JPEG in TIFF (subsampled) not supported",
    "old-style-jpeg-compression-no-samplesperpixel.tif": "as above",
    "separate_planar_extra_samples.tiff": "libtiff: a strip byte count of 0",
    "tiff_tiled_planar_16bit_RGB.tiff": "libvips 8.14: tiled separate planes not supported",
    "tiff_tiled_planar_16bit_RGBa.tiff": "as above",
    "tiff_tiled_planar_lzw.tiff": "as above",
    "tiff_tiled_planar_raw.tif": "as above",
    // Pillow refuses, libvips decodes.
    "avif-odd-grid-2x2.avif": "a hand-built AVIF grid libavif refuses and libheif (and ImageMagick) read",
    "bigtiff-tiffcp-be.tif": "a big-endian BigTIFF: Pillow says missing dimensions, libtiff reads it",
    "hopper_unknown_pixel_mode.tif": "a pixel mode Pillow lacks; libtiff reads it",
    "hopper_webp.tif": "WebP in TIFF: Pillow lacks it, libtiff has it",
    "sugarshack_ifd_offset.mpo": "an MPO whose second image is broken: libvips decodes the first",
    "sugarshack_no_data.mpo": "as above",
    "png_decompression_dos.png": "compressed text over Pillow's limit; the 1 × 1 image decodes",
    // Pillow checks an APNG's frames (fcTL/fdAT numbering, frames announced); libvips decodes the
    // default image with libpng, which ignores APNG chunks.
    "apng_chunk_no_fctl.png": "APNG", "apng_chunk_no_fdat.png": "APNG", "apng_chunk_repeat_fctl.png": "APNG",
    "apng_sequence_fdat_fctl.png": "APNG", "apng_sequence_gap.png": "APNG", "apng_sequence_reorder.png": "APNG",
    "apng_sequence_reorder_chunk.png": "APNG", "apng_sequence_repeat.png": "APNG",
    "apng_sequence_repeat_chunk.png": "APNG", "apng_sequence_start.png": "APNG",
    "apng_syntax_num_frames_high.png": "APNG",
]

/// One row of the decode mode's agreement table.
private struct DecodeRow {
    var decodedByPillow = 0, accepted = 0, sameUprightSize = 0, undecodable = 0, refused = 0
    var undecodableStructureOnly = 0, structureOnly = 0, documented = 0

    var cells: String {
        [decodedByPillow, accepted, sameUprightSize, undecodable, refused, undecodableStructureOnly, documented]
            .map(String.init).joined(separator: " | ")
    }

    mutating func add(_ row: DecodeRow) {
        decodedByPillow += row.decodedByPillow
        accepted += row.accepted
        sameUprightSize += row.sameUprightSize
        undecodable += row.undecodable
        refused += row.refused
        undecodableStructureOnly += row.undecodableStructureOnly
        structureOnly += row.structureOnly
        documented += row.documented
    }
}
