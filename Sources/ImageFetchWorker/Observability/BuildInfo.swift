/// What `image_fetch_build_info{version,revision,swift}` reports. The revision and the Swift
/// version are baked in by scripts/build-info.sh in release builds (scripts/release-build.sh, the
/// Dockerfile); a plain `swift build` reports revision "unknown" and the compiler's major.minor.
package enum BuildInfo {
    package static let version = "0.1.0"

    package static let revision: String = {
        #if IFW_GENERATED_BUILD_INFO
        return GeneratedBuildInfo.revision
        #else
        return "unknown"
        #endif
    }()

    package static let swift: String = {
        #if IFW_GENERATED_BUILD_INFO
        return GeneratedBuildInfo.swift
        #elseif compiler(>=6.5)
        return "6.5+"
        #elseif compiler(>=6.4)
        return "6.4"
        #elseif compiler(>=6.3)
        return "6.3"
        #elseif compiler(>=6.2)
        return "6.2"
        #elseif compiler(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }()

    /// The labels of `image_fetch_build_info`.
    /// `0.1.0 (revision 1a2b3c4d5e6f)`, as `--version` prints it.
    package static var description: String {
        "\(version) (revision \(revision))"
    }

    package static var labels: [(String, String)] {
        [("version", version), ("revision", revision), ("swift", swift)]
    }
}
