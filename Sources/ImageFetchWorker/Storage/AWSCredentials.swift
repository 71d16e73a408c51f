import Foundation

/// SigV4 credentials: an access key and its secret, with a session token and an expiry when they
/// are temporary.
package struct AWSCredentials: Sendable, Equatable, CustomStringConvertible {
    package var accessKeyID: String
    /// A secret: never logged.
    package var secretAccessKey: String
    /// Sent as `x-amz-security-token`. A secret: never logged.
    package var sessionToken: String?
    /// When temporary credentials stop working; nil for long-lived keys.
    package var expiration: Date?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Date? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }

    /// The key id and expiry only.
    package var description: String {
        "AWSCredentials(access_key_id: \(accessKeyID), expiration: \(expiration.map { "\($0)" } ?? "none"))"
    }
}

/// Where the S3 sink's credentials come from, in the order the loader picks them: the `s3.*` keys
/// or `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; else a web identity (EKS: `AWS_ROLE_ARN` and
/// `AWS_WEB_IDENTITY_TOKEN_FILE`, exchanged at STS); else the container credentials endpoint
/// (ECS, EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` or `_RELATIVE_URI`).
package enum AWSCredentialSource: Sendable, Equatable {
    /// Static keys from the configuration.
    case fixed(AWSCredentials)
    /// STS `AssumeRoleWithWebIdentity` with the token in a file the platform rotates.
    case webIdentity(WebIdentity)
    /// An HTTP endpoint that answers with temporary credentials as JSON.
    case container(ContainerEndpoint)

    package struct WebIdentity: Sendable, Equatable {
        /// `AWS_ROLE_ARN`.
        package var roleARN: String
        /// `AWS_WEB_IDENTITY_TOKEN_FILE`: read again at every refresh.
        package var tokenFile: String
        /// `AWS_ROLE_SESSION_NAME`, else `image-fetch-worker`.
        package var sessionName: String
        /// `AWS_ENDPOINT_URL_STS`, else `https://sts.<region>.amazonaws.com`.
        package var stsEndpoint: String
    }

    package struct ContainerEndpoint: Sendable, Equatable {
        /// The full URL: `AWS_CONTAINER_CREDENTIALS_FULL_URI`, or `http://169.254.170.2` and
        /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
        package var url: String
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`, sent as `Authorization`. A secret.
        package var authorizationToken: String?
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`: read at every refresh (EKS rotates it).
        package var authorizationTokenFile: String?
    }

    /// The temporary source the environment names, nil when it names none, or the problem.
    ///
    /// The full URI must use https, or name a loopback address or the ECS and EKS link-local
    /// endpoints (`169.254.170.2`, `169.254.170.23`, `fd00:ec2::23`), as the AWS SDKs require.
    static func fromEnvironment(_ environment: [String: String], region: String) -> Result<Self, ConfigurationError>? {
        let roleARN = environment["AWS_ROLE_ARN"].map(ConfigText.trimmed) ?? ""
        let tokenFile = environment["AWS_WEB_IDENTITY_TOKEN_FILE"].map(ConfigText.trimmed) ?? ""
        if !roleARN.isEmpty || !tokenFile.isEmpty {
            guard !roleARN.isEmpty, !tokenFile.isEmpty else {
                return .failure(
                    ConfigurationError(
                        key: "s3.credentials",
                        problem: "AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE must be set together",
                        source: "environment"))
            }
            guard FileManager.default.isReadableFile(atPath: tokenFile) else {
                return .failure(
                    ConfigurationError(
                        key: "s3.credentials",
                        problem: "the web identity token file \(ConfigText.quoted(tokenFile)) cannot be read",
                        source: "environment variable AWS_WEB_IDENTITY_TOKEN_FILE"))
            }
            let endpoint =
                environment["AWS_ENDPOINT_URL_STS"].map(ConfigText.trimmed).flatMap { $0.isEmpty ? nil : $0 }
                ?? "https://sts.\(region).amazonaws.com"
            guard let sts = S3Addressing.validateEndpoint(endpoint) else {
                return .failure(
                    ConfigurationError(
                        key: "s3.credentials",
                        problem: "AWS_ENDPOINT_URL_STS must be an http:// or https:// URL with a host",
                        source: "environment"))
            }
            let name =
                environment["AWS_ROLE_SESSION_NAME"].map(ConfigText.trimmed).flatMap { $0.isEmpty ? nil : $0 }
                ?? "image-fetch-worker"
            return .success(
                .webIdentity(WebIdentity(roleARN: roleARN, tokenFile: tokenFile, sessionName: name, stsEndpoint: sts)))
        }
        let full = environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"].map(ConfigText.trimmed) ?? ""
        let relative = environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"].map(ConfigText.trimmed) ?? ""
        guard !full.isEmpty || !relative.isEmpty else { return nil }
        let url: String
        if !relative.isEmpty {
            guard relative.hasPrefix("/"),
                !relative.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F })
            else {
                return .failure(
                    ConfigurationError(
                        key: "s3.credentials",
                        problem: "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must be a path starting with /",
                        source: "environment"))
            }
            url = "http://169.254.170.2" + relative
        } else {
            guard case .success(let parsed) = URLPolicy.validate(full), Self.isTrustedContainerHost(parsed) else {
                return .failure(
                    ConfigurationError(
                        key: "s3.credentials",
                        problem:
                            "AWS_CONTAINER_CREDENTIALS_FULL_URI must be an https URL, or an http URL on a loopback address, 169.254.170.2, 169.254.170.23 or [fd00:ec2::23]",
                        source: "environment"))
            }
            url = parsed.url
        }
        var tokenFileValue = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"].map(ConfigText.trimmed)
        if tokenFileValue?.isEmpty == true { tokenFileValue = nil }
        if let file = tokenFileValue, !FileManager.default.isReadableFile(atPath: file) {
            return .failure(
                ConfigurationError(
                    key: "s3.credentials",
                    problem: "the authorization token file \(ConfigText.quoted(file)) cannot be read",
                    source: "environment variable AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
        }
        var token = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN"].map(ConfigText.trimmed)
        if token?.isEmpty == true { token = nil }
        if let token, token.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return .failure(
                ConfigurationError(
                    key: "s3.credentials",
                    problem: "AWS_CONTAINER_AUTHORIZATION_TOKEN must not contain control characters",
                    source: "environment"))
        }
        return .success(
            .container(ContainerEndpoint(url: url, authorizationToken: token, authorizationTokenFile: tokenFileValue)))
    }

    private static func isTrustedContainerHost(_ url: ValidatedURL) -> Bool {
        if url.isHTTPS { return true }
        if ["169.254.170.2", "169.254.170.23", "[fd00:ec2::23]", "localhost"].contains(url.host) { return true }
        guard let address = url.ipAddress else { return false }
        switch address {
        case .v4(let value): return value >> 24 == 127
        case .v6(let value): return value == 1
        }
    }
}
