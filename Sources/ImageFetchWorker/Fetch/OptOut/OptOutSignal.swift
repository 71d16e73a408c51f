/// Why an origin's answer forbids the job: the signal an origin used to opt out of the use the
/// worker serves (AI training, datasets, indexing). A job that meets one ends `opted_out`
/// (docs/message-contract.md), is not retried, and stores nothing.
package enum OptOutSignal: Sendable, Equatable {
    /// The image's `X-Robots-Tag` carried `directive` (lower case), one of
    /// `fetch.opt_out.directives`.
    case xRobotsTag(directive: String)
    /// The image's TDMRep header `tdm-reservation: 1`: text and data mining rights reserved.
    case tdmReservation
    /// The origin's robots.txt disallows the URL for `fetch.opt_out.user_agent`.
    case robotsDisallowed
    /// The origin's robots.txt could not be fetched (5xx, or no answer): RFC 9309 §2.3.1.3-4 read
    /// that as a complete disallow.
    case robotsUnreachable

    /// The `signal` label of `image_fetch_opted_out_total`.
    package var metricLabel: String {
        switch self {
        case .xRobotsTag: "x_robots_tag"
        case .tdmReservation: "tdm_reservation"
        case .robotsDisallowed, .robotsUnreachable: "robots_txt"
        }
    }

    /// For the result's message: names the signal, never the URL.
    package var explanation: String {
        switch self {
        case .xRobotsTag(let directive): "the image's X-Robots-Tag says \(directive)"
        case .tdmReservation: "the image's tdm-reservation header reserves text and data mining"
        case .robotsDisallowed: "the origin's robots.txt disallows this path"
        case .robotsUnreachable: "the origin's robots.txt is unreachable, which RFC 9309 reads as a complete disallow"
        }
    }
}
