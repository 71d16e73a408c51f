import CCurl
import Dispatch
import Testing

@testable import ImageFetchWorker

#if canImport(Glibc)
import Glibc
#endif

/// A host with a vetoed address and an allowed one (a unique-local AAAA beside a public A): when
/// the allowed one refuses the connection, the job failed `forbidden_address`, final, where the
/// origin was only down for a moment (`connect_failed`, retried).
@Suite struct VetoedAddressOutcomeTests {
    /// The transfer's open-socket callback for an address of `family` (storage for an IPv6
    /// address after it, as libcurl passes it).
    static func open(_ transfer: FetchTransfer, family: Int32) -> curl_socket_t {
        let size = MemoryLayout<curl_sockaddr>.size + MemoryLayout<sockaddr_in6>.size
        let raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { raw.deallocate() }
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        let address = raw.bindMemory(to: curl_sockaddr.self, capacity: 1)
        address.pointee.family = family
        address.pointee.socktype = Int32(SOCK_STREAM.rawValue)
        address.pointee.addr.sa_family = sa_family_t(family)
        return transfer.openSocket(address)
    }

    static func transfer(queue: DispatchQueue) -> FetchTransfer {
        FetchTransfer(
            id: 1, request: FetchRequest(url: "http://mixed.example/x.png"), queue: queue, maxBytes: 1000,
            addressPolicy: { $0.pointee.sa_family == sa_family_t(AF_INET6) ? "unique-local" : nil },
            completion: { _ in })
    }

    @Test func aRefusedAllowedAddressAfterAVetoedOneIsAConnectFailure() {
        let queue = DispatchQueue(label: "test.veto")
        let transfer = Self.transfer(queue: queue)
        queue.sync {
            #expect(Self.open(transfer, family: AF_INET6) == -1)
            let socket = Self.open(transfer, family: AF_INET)
            #expect(socket >= 0)
            close(socket)
            #expect(
                transfer.failure(for: CURLE_COULDNT_CONNECT, status: 0, maxRedirects: 5) == .connectFailed(.refused))
        }
    }

    @Test func everyAddressVetoedIsTheVeto() {
        let queue = DispatchQueue(label: "test.veto")
        let transfer = Self.transfer(queue: queue)
        queue.sync {
            #expect(Self.open(transfer, family: AF_INET6) == -1)
            #expect(
                transfer.failure(for: CURLE_COULDNT_CONNECT, status: 0, maxRedirects: 5)
                    == .addressRefused(addressClass: "unique-local"))
        }
    }
}
