import Testing

@testable import ImageFetchWorker

/// `queue.max_job_bytes`: a default, and a bad value that names its key (the executable exits 78).
@Suite struct MaxJobBytesConfigurationTests {
    @Test func defaultsToOneMebibyte() throws {
        #expect(try ConfigurationLoader.load(arguments: [], environment: [:]).queue.maxJobBytes == 1_048_576)
    }

    @Test func isReadFromTheEnvironmentAndTheFlag() throws {
        #expect(
            try ConfigurationLoader.load(arguments: [], environment: ["QUEUE_MAX_JOB_BYTES": "65536"]).queue.maxJobBytes
                == 65536)
        #expect(
            try ConfigurationLoader.load(arguments: ["--queue-max-job-bytes", "2048"], environment: [:]).queue
                .maxJobBytes == 2048)
    }

    @Test(arguments: ["0", "-1", "1MiB", "536870913", ""])
    func aBadValueNamesTheKey(_ value: String) {
        #expect {
            try ConfigurationLoader.load(arguments: [], environment: ["QUEUE_MAX_JOB_BYTES": value])
        } throws: { error in
            (error as? ConfigurationError)?.key == "queue.max_job_bytes"
        }
    }
}
