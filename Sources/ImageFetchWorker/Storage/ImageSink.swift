/// Where a stored body ended up; nil location for `storage.kind=none`.
public struct StoredObject: Sendable, Equatable {
    /// `file:///abs/path` or `s3://bucket/key`; nil when nothing was stored.
    public var location: String?
    /// Whether this store wrote (or uploaded) the object; false when its content address already
    /// held these bytes and nothing was written (the result's `stored`).
    public var wrote: Bool

    /// Creates a stored-object description.
    public init(location: String?, wrote: Bool = true) {
        self.location = location
        self.wrote = wrote
    }
}

/// A body to store, with what is known about it.
public struct StorageRequest: Sendable {
    /// The whole body, exactly as fetched.
    public var body: [UInt8]
    /// The SHA-256 of ``body``, lowercase hex.
    public var sha256: String
    /// The format and size read from ``body``.
    public var info: ImageInfo
    /// The job's `key`, unsanitised; sinks pass it through ``StorageKey/sanitize(_:)``.
    public var keyHint: String?
    /// The job's `id`, for logs and object metadata.
    public var jobID: String
    /// Where the body came from, for object metadata; never put it in an error message.
    public var sourceURL: String

    /// Creates a storage request.
    public init(
        body: [UInt8],
        sha256: String,
        info: ImageInfo,
        keyHint: String?,
        jobID: String,
        sourceURL: String
    ) {
        self.body = body
        self.sha256 = sha256
        self.info = info
        self.keyHint = keyHint
        self.jobID = jobID
        self.sourceURL = sourceURL
    }

    /// The key the body is stored under: the sanitised ``keyHint`` when it is usable, else the
    /// content-addressed key.
    package var resolvedKey: String {
        resolved.key
    }

    /// ``resolvedKey``, and whether it is the content address (a usable hint that equals it
    /// counts too); the content address is built once for both. A hint in the content-address
    /// namespace (``StorageKey/isInContentAddressSpace(_:)``) that is not this body's own is not
    /// usable: the body goes to its own content address instead.
    var resolved: (key: String, isContentAddress: Bool) {
        let contentAddress = StorageKey.contentAddressed(sha256: sha256, format: info.format)
        if let keyHint, let key = StorageKey.sanitize(keyHint) {
            if key == contentAddress { return (key, true) }
            if !StorageKey.isInContentAddressSpace(key) { return (key, false) }
        }
        return (contentAddress, true)
    }
}

/// Somewhere to store image bodies.
package protocol ImageSink: Sendable {
    /// Stores the body, then calls completion exactly once, on any thread. Never blocks the caller.
    ///
    /// Failures are a ``StorageError``; the job's result says `storage_failed`.
    func store(_ request: StorageRequest, completion: @escaping @Sendable (Result<StoredObject, StorageError>) -> Void)
}

/// The sink for `storage.kind=none`: stores nothing and answers at once with a nil location.
package struct NoneSink: ImageSink {
    /// Creates the sink.
    package init() {}

    /// Calls `completion` synchronously, on the caller's thread, with a nil location.
    package func store(
        _ request: StorageRequest,
        completion: @escaping @Sendable (Result<StoredObject, StorageError>) -> Void
    ) {
        completion(.success(StoredObject(location: nil)))
    }
}
