extension JobError {
    /// A sink's failure as the result contract names it: `storage_failed`, retried when the sink
    /// says the same store may work later.
    package init(_ failure: StorageError) {
        self.init(.storageFailed, failure.message, retryable: failure.retryable)
    }
}
