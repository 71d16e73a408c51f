import Dispatch
import Synchronization
import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct CompletionBatchTests {
    @Test func outsideABatchASignalActsAtOnce() {
        let semaphore = DispatchSemaphore(value: 0)
        #expect(CompletionBatch.current == nil)
        CompletionBatch.signal(semaphore)
        #expect(semaphore.wait(timeout: .now()) == .success)
    }

    @Test func outsideABatchWorkIsQueuedAtOnce() {
        let queue = DispatchQueue(label: "test.batch.outside")
        let ran = Mutex(false)
        CompletionBatch.async(on: queue) { ran.withLock { $0 = true } }
        queue.sync {}  // a serial queue: whatever was queued before has run
        #expect(ran.withLock { $0 })
    }

    @Test func insideABatchSignalsWaitForItsEnd() {
        let semaphore = DispatchSemaphore(value: 0)
        CompletionBatch.run {
            #expect(CompletionBatch.current != nil)
            for _ in 0..<3 { CompletionBatch.signal(semaphore) }
            #expect(semaphore.wait(timeout: .now()) == .timedOut)
        }
        #expect(CompletionBatch.current == nil)
        for _ in 0..<3 { #expect(semaphore.wait(timeout: .now()) == .success) }
        #expect(semaphore.wait(timeout: .now()) == .timedOut)
    }

    @Test func insideABatchWorkLeavesAtItsEndInOrderPerQueue() {
        let first = DispatchQueue(label: "test.batch.first")
        let second = DispatchQueue(label: "test.batch.second")
        let log = Mutex<[String]>([])
        CompletionBatch.run {
            for item in ["a1", "a2", "a3"] { CompletionBatch.async(on: first) { log.withLock { $0.append(item) } } }
            CompletionBatch.async(on: second) { log.withLock { $0.append("b1") } }
            first.sync {}
            second.sync {}
            #expect(log.withLock { $0 }.isEmpty, "work left before the batch ended")
        }
        first.sync {}
        second.sync {}
        let value = log.withLock { $0 }
        #expect(value.filter { $0.hasPrefix("a") } == ["a1", "a2", "a3"])
        #expect(value.contains("b1"))
    }

    @Test func aNestedRunJoinsTheOuterBatch() {
        let semaphore = DispatchSemaphore(value: 0)
        CompletionBatch.run {
            CompletionBatch.run { CompletionBatch.signal(semaphore) }
            #expect(semaphore.wait(timeout: .now()) == .timedOut, "the inner run flushed on its own")
        }
        #expect(semaphore.wait(timeout: .now()) == .success)
    }

    @Test func theBatchBelongsToItsThreadOnly() {
        let semaphore = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let seenElsewhere = Mutex<Bool?>(nil)
        CompletionBatch.run {
            // Another thread finishing a job (a storage lane, the admission queue) acts at once.
            Thread.detach {
                seenElsewhere.withLock { $0 = CompletionBatch.current != nil }
                CompletionBatch.signal(semaphore)
                done.signal()
            }
            done.wait()
            #expect(semaphore.wait(timeout: .now()) == .success)
        }
        #expect(seenElsewhere.withLock { $0 } == false)
    }
}

/// A plain thread, so the test does not depend on which thread libdispatch picks.
private enum Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable {
            // @unchecked Sendable: handed to the new thread once and only read there.
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let status = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(status == 0)
        pthread_detach(thread)
    }
}
