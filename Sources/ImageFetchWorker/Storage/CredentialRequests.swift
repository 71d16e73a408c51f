import Foundation

/// The requests for temporary credentials, and the parsing of their answers. Problems are short
/// texts that name the source and the HTTP status or the error code, never a token or a key.
enum CredentialRequests {
    static func request(for source: AWSCredentialSource) -> Result<FetchRequest, ConfigProblem> {
        switch source {
        case .fixed:
            return .failure(ConfigProblem("fixed credentials need no request"))
        case .webIdentity(let identity):
            guard let token = readToken(identity.tokenFile) else {
                return .failure(
                    ConfigProblem(
                        "the web identity token file \(ConfigText.quoted(identity.tokenFile)) cannot be read or is empty"
                    ))
            }
            var request = FetchRequest(url: identity.stsEndpoint + "/")
            request.method = .post
            request.checkAddresses = false
            request.headers = ["Content-Type: application/x-www-form-urlencoded", "Accept: application/xml"]
            let form = [
                ("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", identity.roleARN),
                ("RoleSessionName", identity.sessionName), ("WebIdentityToken", token),
            ]
            request.uploadBody = Array(form.map { "\($0.0)=\(formEncoded($0.1))" }.joined(separator: "&").utf8)
            return .success(request)
        case .container(let endpoint):
            var request = FetchRequest(url: endpoint.url)
            request.checkAddresses = false
            var token = endpoint.authorizationToken
            if let file = endpoint.authorizationTokenFile {
                guard let fromFile = readToken(file) else {
                    return .failure(
                        ConfigProblem(
                            "the authorization token file \(ConfigText.quoted(file)) cannot be read or is empty"))
                }
                token = fromFile
            }
            if let token {
                guard RequestHeaders.valueProblem(token) == nil else {
                    return .failure(
                        ConfigProblem("the container authorization token contains a control character or is too long"))
                }
                request.headers = ["Authorization: \(token)"]
            }
            return .success(request)
        }
    }

    static func parse(
        _ response: FetchResponse, for source: AWSCredentialSource, now: Date = Date()
    ) -> Result<AWSCredentials, ConfigProblem> {
        let what: String
        switch source {
        case .fixed(let credentials): return .success(credentials)
        case .webIdentity: what = "STS AssumeRoleWithWebIdentity"
        case .container: what = "the container credentials endpoint"
        }
        let body = String(decoding: response.body, as: UTF8.self)
        if let failure = response.failure {
            if let status = response.httpStatus, status > 0 {
                // Only a code shaped like a header name (AWS codes are like `AccessDenied`): it goes
                // into a log line, so never the answer's bytes.
                let code =
                    xmlElement("Code", in: body).flatMap { RequestHeaders.isValidName($0) ? " (\($0))" : nil } ?? ""
                return .failure(ConfigProblem("\(what) answered HTTP \(status)\(code)"))
            }
            return .failure(ConfigProblem("\(what) could not be reached: \(failure.message)"))
        }
        switch source {
        case .webIdentity:
            guard let key = xmlElement("AccessKeyId", in: body), let secret = xmlElement("SecretAccessKey", in: body),
                let token = xmlElement("SessionToken", in: body)
            else { return .failure(ConfigProblem("\(what) answered without credentials")) }
            return validated(key, secret, token, xmlElement("Expiration", in: body), what: what, now: now)
        default:
            struct Answer: Decodable {
                var AccessKeyId: String?
                var SecretAccessKey: String?
                var Token: String?
                var Expiration: String?
            }
            guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)),
                let key = answer.AccessKeyId, let secret = answer.SecretAccessKey
            else { return .failure(ConfigProblem("\(what) answered without credentials")) }
            return validated(key, secret, answer.Token, answer.Expiration, what: what, now: now)
        }
    }

    private static func validated(
        _ key: String, _ secret: String, _ token: String?, _ expiration: String?, what: String, now: Date
    ) -> Result<AWSCredentials, ConfigProblem> {
        guard !key.isEmpty, !secret.isEmpty, !key.utf8.contains(UInt8(ascii: ":")),
            [key, secret, token ?? ""].allSatisfy({ RequestHeaders.valueProblem($0) == nil })
        else { return .failure(ConfigProblem("\(what) answered with malformed credentials")) }
        var date: Date? = nil
        if let expiration {
            guard let parsed = parseDate(expiration) else {
                return .failure(ConfigProblem("\(what) answered with an unreadable Expiration"))
            }
            // Taken, they would replace keys that still hold, and be refreshed every second.
            guard parsed > now else {
                return .failure(ConfigProblem("\(what) answered with credentials that expired already"))
            }
            date = parsed
        }
        return .success(
            AWSCredentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token, expiration: date))
    }

    static func parseDate(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    private static func readToken(_ path: String) -> String? {
        guard ConfigurationLoader.smallFileProblem(path) == nil, let data = FileManager.default.contents(atPath: path)
        else { return nil }
        let text = ConfigText.trimmed(String(decoding: data, as: UTF8.self))
        return text.isEmpty ? nil : text
    }

    /// `application/x-www-form-urlencoded`: all but the unreserved characters as `%XX`.
    static func formEncoded(_ text: String) -> String {
        S3Addressing.uriEncode(text, keepSlash: false)
    }

    /// The text of the first `<name>…</name>`, with XML's five entities decoded.
    static func xmlElement(_ name: String, in xml: String) -> String? {
        guard let open = xml.range(of: "<\(name)>"),
            let close = xml.range(of: "</\(name)>", range: open.upperBound..<xml.endIndex)
        else { return nil }
        return String(xml[open.upperBound..<close.lowerBound])
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
