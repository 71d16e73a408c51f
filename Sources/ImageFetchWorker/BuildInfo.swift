/// The version and the git revision this binary was built from: `--version`, the default
/// `fetch.user_agent`, the AMQP client properties and the `image_fetch_build_info` metric read them.
///
/// The revision stays `unknown` in a plain `swift build`. scripts/release-build.sh (which `make
/// release` and the Dockerfile use) writes the commit into ``revision`` for the build and puts the
/// line back afterwards; the Dockerfile, whose context has no `.git`, passes it in as the build
/// argument `REVISION`. The version changes by hand, with a new section in CHANGELOG.md.
public enum BuildInfo {
    /// The release version, as in CHANGELOG.md.
    public static let version = "0.1.0"
    /// The git commit (`git describe --always --dirty`), or `unknown`.
    public static let revision = "unknown"

    /// `0.1.0 (revision 1a2b3c4d5e6f)`, as `--version` prints it.
    public static var description: String {
        "\(version) (revision \(revision))"
    }
}
