/// The job flow's one hook for robots.txt (`fetch.robots = respect`): between admission and the
/// image's fetch. The header signals need no hook here: the engine checks them on the response
/// (``FetchRequest/optOut``) and the fetch fails with ``FetchError/optedOut(_:)``.
extension JobRunner {
    /// Runs `fetch` when robots.txt allows the job's URL (or is not consulted); otherwise ends
    /// the job `opted_out`, or hands it back if the robots.txt fetch it waited for was aborted.
    /// The job keeps its origin slot and permit meanwhile: the robots.txt fetch is made in it.
    func checkRobots(
        _ context: JobContext, job: Job, url: String, slot: OriginSlot,
        then fetch: @escaping @Sendable () -> Void
    ) {
        guard let robotsGate else { return fetch() }
        robotsGate.check(url, origin: slot.origin) { [self] verdict in
            switch verdict {
            case .allowed:
                fetch()
            case .optedOut(let signal):
                optOutMetrics.optedOut(signal)
                // No fetch of the image: the slot goes back as if one ended, then the permit.
                run(context) { $0.fetched(.other) }
                run(context) { $0.decided() }
                let followers = takeFollowers(context)
                finish(context, job: job, error: JobError(signal), response: nil)
                shareFailure(followers, error: JobError(signal))
            case .aborted:
                run(context) { $0.handBack() }
            }
        }
    }
}
