import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A server written in Python, started by a test: `script` runs from a scratch folder of its own
/// (with `files` written beside it) and gets `arguments(folder)`; once it prints `ready`, each
/// later piece of its standard output goes to `output`. ``stop()`` kills it and removes the folder.
final class PythonServer: @unchecked Sendable {  // set up once; stopped by its owner only
    let folder: URL
    private let process: Process
    private let standardOutput: FileHandle

    init(
        script: String, files: [String: Data] = [:], arguments: (URL) -> [String],
        output: @escaping @Sendable (String) -> Void
    ) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifw-python-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, data) in files { try data.write(to: folder.appendingPathComponent(name)) }
        let path = folder.appendingPathComponent("server.py")
        try script.write(to: path, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [path.path] + arguments(folder)
        let pipe = Pipe()
        process.standardOutput = pipe
        standardOutput = pipe.fileHandleForReading
        try process.run()
        _ = standardOutput.readData(ofLength: 6)
        standardOutput.readabilityHandler = { handle in output(String(decoding: handle.availableData, as: UTF8.self)) }
    }

    func stop() {
        standardOutput.readabilityHandler = nil
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: folder)
    }
}
