// libFuzzer entry point for ImageSniffer. Not part of the package: it is compiled together with
// Sources/ImageFetchWorker/Image/*.swift by swiftc (see Fuzz/README.md), so it calls the sniffer
// directly, without importing a module.

/// Checks, for any input, that the sniffer and the structure walkers do not trap (ASan catches a
/// read past the buffer) and that the sniffer's answers hang together:
/// a whole body never needs more data, an image has positive dimensions, a prefix that decides
/// agrees with the whole body (``ImageInfo/isConsistent(withWhole:)``), and so does a shorter one.
@_cdecl("LLVMFuzzerTestOneInput")
public func imageSnifferFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let complete = ImageSniffer.inspect(bytes, isComplete: true)
    let partial = ImageSniffer.inspect(bytes, isComplete: false)
    switch complete {
    case .needMoreData:
        fatalError("a whole body needed more data")
    case .image(let info):
        precondition(info.width > 0 && info.height > 0, "an image with a zero dimension")
    case .notAnImage(let reason):
        precondition(!reason.isEmpty && reason.utf8.count < 80, "an empty or long reason")
    }
    precondition(agrees(partial, complete), "a prefix disagreed with the whole body")

    // A shorter prefix (its length chosen by the input) must need more data or agree.
    if size > 1 {
        let cut = Int(bytes[size - 1]) % size
        let shorter = ImageSniffer.inspect(UnsafeRawBufferPointer(rebasing: bytes[0..<cut]), isComplete: false)
        precondition(agrees(shorter, complete), "a shorter prefix disagreed")
    }
    if case .image(let info) = complete {
        // The pixel count saturates rather than overflows.
        precondition(info.pixelCount >= info.width && info.pixelCount >= info.height, "a pixel count overflowed")
        // The structure walk of the body, and of a cut of it (its length chosen by the input).
        checkReason(ImageSniffer.checkStructure(bytes, format: info.format))
        if size > 1 {
            let cut = Int(bytes[size - 1]) % size
            let shorter = UnsafeRawBufferPointer(rebasing: bytes[0..<cut])
            checkReason(ImageSniffer.checkStructure(shorter, format: info.format))
        }
    }
    // Every walker on any input, whatever the sniffer said: the walkers must not trap on bytes
    // that other formats' checks would have refused first.
    let formats = ImageFormat.allCases
    checkReason(ImageSniffer.checkStructure(bytes, format: formats[size % formats.count]))
    return 0
}

/// A structure problem's reason is short and not empty.
func checkReason(_ problem: StructureProblem?) {
    switch problem {
    case .none: break
    case .truncated(let reason), .corrupt(let reason):
        precondition(!reason.isEmpty && reason.utf8.count < 80, "an empty or long structure reason")
    }
}

/// Whether a prefix's answer is "need more data" or agrees with the whole body's.
func agrees(_ partial: ImageInspection, _ whole: ImageInspection) -> Bool {
    switch (partial, whole) {
    case (.needMoreData, _): return true
    case (.image(let p), .image(let w)): return p.isConsistent(withWhole: w)
    default: return partial == whole
    }
}
