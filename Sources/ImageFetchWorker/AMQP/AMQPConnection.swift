import CRabbitMQ
import CShims
import Foundation

/// Owns one rabbitmq-c connection (`amqp_connection_state_t`) and its socket.
///
/// Not thread-safe: rabbitmq-c forbids using a connection from two threads, so every method must
/// be called from one serial queue (``BrokerSession``'s channel queue) or from a single thread
/// (the `publish` and `depth` commands). Calls are synchronous; RPCs wait for their reply, which
/// rabbitmq-c bounds with the RPC timeout set at open.
package final class AMQPConnection {
    /// TLS options for an `amqps://` URL.
    package struct TLSOptions: Sendable, Equatable {
        package var caFile: String?
        package var certFile: String?
        package var keyFile: String?
        package var verify: Bool
        package init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil, verify: Bool = true) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
            self.verify = verify
        }
    }

    /// Result of one non-blocking read.
    package enum FrameRead {
        case frame(amqp_frame_t)
        case none
    }

    let state: amqp_connection_state_t
    private var socket: OpaquePointer?
    private(set) var isOpen = false
    /// The C memory of a publish's properties, reused by every publish (see ``publish(channel:_:)``).
    private let publishArena = AMQPArena()

    /// Creates an unconnected connection.
    package init() throws(AMQPError) {
        guard let state = amqp_new_connection() else {
            throw AMQPError(.library, operation: "amqp_new_connection", message: "out of memory")
        }
        self.state = state
    }

    deinit {
        // A connection dropped after a failure gets the short close of ``close(replyCode:)``: with
        // the RPC timeout of `open`, a broker that reads nothing (one that blocks the connection)
        // held the caller 30 s more.
        close()
        amqp_destroy_connection(state)
    }

    /// Opens the TCP (or TLS) socket and logs in with the PLAIN mechanism.
    /// - Parameter interrupter: attached to the socket once it is open, so that another thread
    ///   can end the login (the caller detaches it before this connection goes away).
    package func open(
        url: AMQPURL, tls: TLSOptions, heartbeat: Int, connectTimeout: Double = 10,
        rpcTimeout: Double = 30, connectionName: String, interrupter: ConnectInterrupter? = nil
    ) throws(AMQPError) {
        if url.tls {
            guard let ssl = amqp_ssl_socket_new(state) else {
                throw AMQPError(.tls, operation: "TLS socket", message: "could not create the TLS socket")
            }
            socket = ssl
            amqp_ssl_socket_set_verify_peer(ssl, tls.verify ? 1 : 0)
            amqp_ssl_socket_set_verify_hostname(ssl, tls.verify ? 1 : 0)
            // rabbitmq-c 0.11 loads no CA certificates by itself, not even the system's: without
            // a file every verified handshake would fail. Load the system bundle when none is set.
            if let caFile = tls.caFile ?? (tls.verify ? Self.systemCABundle() : nil) {
                try Self.checkReadable(caFile, key: "amqp.tls.ca_file")
                let status = amqp_ssl_socket_set_cacert(ssl, caFile)
                if status != AMQP_STATUS_OK.rawValue {
                    throw AMQPError(
                        .tls, operation: "amqp.tls.ca_file \(caFile)",
                        message: "holds no usable PEM CA certificate")
                }
            } else if tls.verify {
                throw AMQPError(
                    .tls, operation: "amqp.tls.ca_file",
                    message:
                        "is not set and no system CA bundle was found; set it to the CA that signed the broker's certificate"
                )
            }
            if let certFile = tls.certFile {
                guard let keyFile = tls.keyFile else {
                    throw AMQPError(.tls, operation: "amqp.tls.cert_file", message: "amqp.tls.key_file is not set")
                }
                try Self.checkReadable(certFile, key: "amqp.tls.cert_file")
                try Self.checkReadable(keyFile, key: "amqp.tls.key_file")
                let status = amqp_ssl_socket_set_key(ssl, certFile, keyFile)
                if status != AMQP_STATUS_OK.rawValue {
                    throw AMQPError(
                        .tls, operation: "amqp.tls.cert_file \(certFile) / amqp.tls.key_file \(keyFile)",
                        message: "not a PEM certificate and its matching private key")
                }
            }
        } else {
            guard let tcp = amqp_tcp_socket_new(state) else {
                throw AMQPError(.socket, operation: "TCP socket", message: "could not create the socket")
            }
            socket = tcp
        }
        var timeout = timeval(seconds: connectTimeout)
        let status = amqp_socket_open_noblock(socket, url.host, Int32(url.port), &timeout)
        if status != AMQP_STATUS_OK.rawValue {
            var error = AMQPError.status(status, operation: "connect to \(url.host):\(url.port)")
            if url.tls {
                let ca = tls.caFile.map { "amqp.tls.ca_file \($0)" } ?? "the system CA bundle"
                switch amqp_status_enum(rawValue: status) {
                case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
                    error.message =
                        "TLS peer verification failed: the broker's certificate is not signed by a CA in \(ca)"
                case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
                    error.message =
                        "TLS hostname verification failed: the broker's certificate does not name \(url.host) "
                        + "(rabbitmq-c matches DNS names of the certificate, so connect by a name it lists)"
                case AMQP_STATUS_SSL_CONNECTION_FAILED, AMQP_STATUS_SSL_ERROR:
                    error.message =
                        "TLS handshake failed: the broker's certificate did not verify against \(ca), "
                        + "or the broker refused the client certificate, or the port does not speak TLS"
                    error.code = .tls
                default:
                    break
                }
            }
            throw error
        }
        if let interrupter, !interrupter.attach(fileDescriptor) {
            // Not open in the protocol's sense: closing must not send connection.close and wait,
            // with no RPC timeout set yet, for an answer that a silent peer never gives.
            throw AMQPError(.interrupted, operation: "connect to \(url.host):\(url.port)", message: "shutting down")
        }
        isOpen = true
        var rpc = timeval(seconds: rpcTimeout)
        _ = amqp_set_rpc_timeout(state, &rpc)
        _ = amqp_set_handshake_timeout(state, &rpc)

        let arena = AMQPArena()
        var properties = arena.table([
            "product": .string("image-fetch-worker"),
            "version": .string(WorkerVersion.current),
            "platform": .string("Swift"),
            "connection_name": .string(connectionName),
            "capabilities": .table([
                "consumer_cancel_notify": .bool(true),
                "connection.blocked": .bool(true),
                "publisher_confirms": .bool(true),
                "basic.nack": .bool(true),
                "authentication_failure_close": .bool(true),
            ]),
        ])
        let reply = ifw_amqp_login_plain(
            state, url.vhost, 0, Int32(AMQP_DEFAULT_FRAME_SIZE), Int32(heartbeat), &properties,
            url.user, url.password)
        if let error = AMQPError.reply(reply, operation: "login to vhost \(url.vhost) as \(url.user)") {
            isOpen = false
            if interrupter?.isInterrupted == true {
                throw AMQPError(.interrupted, operation: error.operation, message: "shutting down")
            }
            throw error.code == .library || error.code == .connectionClosed
                ? AMQPError(.login, operation: error.operation, message: error.message, replyCode: error.replyCode)
                : error
        }
    }

    /// The first CA bundle found: `SSL_CERT_FILE`, then the usual Debian, Red Hat and Alpine paths.
    static func systemCABundle() -> String? {
        var candidates = [
            "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem",
        ]
        if let fromEnvironment = ProcessInfo.processInfo.environment["SSL_CERT_FILE"], !fromEnvironment.isEmpty {
            candidates.insert(fromEnvironment, at: 0)
        }
        return candidates.first { access($0, R_OK) == 0 }
    }

    /// Throws a ``AMQPError/Code/tls`` error naming `key` and `path` unless the file can be read.
    static func checkReadable(_ path: String, key: String) throws(AMQPError) {
        if access(path, R_OK) != 0 {
            let reason = String(cString: strerror(errno))
            throw AMQPError(.tls, operation: "\(key) \(path)", message: "cannot be read: \(reason)")
        }
    }

    /// The socket's file descriptor, for a read source; -1 when closed.
    package var fileDescriptor: Int32 { amqp_get_sockfd(state) }

    /// Whether rabbitmq-c holds undelivered frames or unread bytes, so a read would not block.
    package var hasBufferedInput: Bool {
        amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0
    }

    private func check(_ operation: @autoclosure () -> String) throws(AMQPError) {
        if let error = AMQPError.reply(amqp_get_rpc_reply(state), operation: operation()) { throw error }
    }

    /// Opens a channel.
    package func openChannel(_ channel: UInt16) throws(AMQPError) {
        _ = amqp_channel_open(state, channel)
        try check("channel.open \(channel)")
    }

    /// Closes a channel (RPC).
    package func closeChannel(_ channel: UInt16) {
        _ = amqp_channel_close(state, channel, Int32(AMQP_REPLY_SUCCESS))
    }

    /// Sets the prefetch count (`basic.qos`).
    package func qos(channel: UInt16, prefetch: Int) throws(AMQPError) {
        _ = amqp_basic_qos(state, channel, 0, UInt16(clamping: prefetch), 0)
        try check("basic.qos")
    }

    /// Turns on publisher confirms.
    package func confirmSelect(channel: UInt16) throws(AMQPError) {
        _ = amqp_confirm_select(state, channel)
        try check("confirm.select")
    }

    /// Declares a queue; `passive` only checks that it exists. Returns ready messages and consumers.
    @discardableResult
    package func declareQueue(
        channel: UInt16, name: String, passive: Bool = false, durable: Bool = true,
        arguments: [String: AMQPFieldValue] = [:]
    ) throws(AMQPError) -> (messages: Int, consumers: Int) {
        let arena = AMQPArena()
        let ok = amqp_queue_declare(
            state, channel, arena.bytes(name), passive ? 1 : 0, durable ? 1 : 0, 0, 0,
            arena.table(arguments))
        try check("queue.declare \(name)")
        guard let ok else { return (0, 0) }
        return (Int(ok.pointee.message_count), Int(ok.pointee.consumer_count))
    }

    /// Starts consuming with manual acks; returns the consumer tag.
    package func consume(channel: UInt16, queue: String, consumerTag: String) throws(AMQPError) -> String {
        let arena = AMQPArena()
        let ok = amqp_basic_consume(
            state, channel, arena.bytes(queue), arena.bytes(consumerTag), 0, 0, 0,
            amqp_table_t(num_entries: 0, entries: nil))
        try check("basic.consume \(queue)")
        return ok?.pointee.consumer_tag.stringValue ?? consumerTag
    }

    /// Cancels a consumer and waits for cancel-ok. Deliveries that arrive meanwhile stay queued in
    /// rabbitmq-c and come out of the next reads.
    package func cancel(channel: UInt16, consumerTag: String) throws(AMQPError) {
        let arena = AMQPArena()
        _ = amqp_basic_cancel(state, channel, arena.bytes(consumerTag))
        try check("basic.cancel")
    }

    /// Publishes a message. The confirm arrives later as a frame.
    package func publish(
        channel: UInt16, _ message: OutboundMessage, adding header: AMQPHeader? = nil
    ) throws(AMQPError) {
        let arena = publishArena
        defer { arena.reset() }
        var envelope = arena.envelope(of: message, adding: header)
        try checkEncodable(message, &envelope.properties, arenaBytes: arena.bytesHandedOut)
        let status = message.body.withUnsafeBytes { body -> Int32 in
            let bytes = amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress))
            return amqp_basic_publish(
                state, channel, envelope.exchange, envelope.routingKey,
                message.mandatory ? 1 : 0, 0, &envelope.properties, bytes)
        }
        if status != AMQP_STATUS_OK.rawValue { throw AMQPError.status(status, operation: "basic.publish") }
    }

    /// rabbitmq-c's `amqp_basic_publish` sends the method frame, then encodes the content header
    /// into a buffer of `frame_max` bytes: properties that do not fit fail there, after the method
    /// went out, and the broker closes the connection for the missing header. A short string over
    /// 255 bytes fails the same way. So both are checked first, and the message alone is refused
    /// (``AMQPError/Code/unencodable``).
    ///
    /// Encoded properties take at most what the arena handed out for them (each table entry or
    /// array element is a 40- or 24-byte struct there, more than its wire overhead) plus 23 bytes
    /// of lengths and fixed fields; only when that bound does not fit are they encoded to know.
    func checkEncodable(
        _ message: OutboundMessage, _ properties: inout amqp_basic_properties_t,
        arenaBytes: Int
    ) throws(AMQPError) {
        func refuse(_ why: String) -> AMQPError {
            AMQPError(.unencodable, operation: "basic.publish to \(message.routingKey.prefix(64))", message: why)
        }
        // One by one, not as an array: this runs on every publish, and the array was an allocation.
        func tooLong(_ text: String?) -> Bool { (text?.utf8.count ?? 0) > 255 }
        let given = message.properties
        if tooLong(message.exchange) || tooLong(message.routingKey) || tooLong(given.contentType)
            || tooLong(given.messageID) || tooLong(given.correlationID) || tooLong(given.replyTo)
            || tooLong(given.contentEncoding) || tooLong(given.type) || tooLong(given.appID)
        {
            throw refuse("a short string (exchange, routing key or property) is over 255 bytes")
        }
        // The header frame's payload: its 7-byte frame header, end byte, class, weight and body size.
        let room = Int(amqp_get_frame_max(state)) - 20
        guard arenaBytes + 64 > room else { return }
        var scratch = [UInt8](repeating: 0, count: max(room, 0))
        let encoded = scratch.withUnsafeMutableBytes { buffer in
            withUnsafeMutablePointer(to: &properties) {
                let output = amqp_bytes_t(len: buffer.count, bytes: buffer.baseAddress)
                return amqp_encode_properties(UInt16(AMQP_BASIC_CLASS), $0, output)
            }
        }
        if encoded < 0 { throw refuse("its properties do not fit in a frame (\(room) bytes)") }
    }

    /// Acks a delivery (or all up to it with `multiple`).
    package func ack(channel: UInt16, tag: UInt64, multiple: Bool = false) throws(AMQPError) {
        let status = amqp_basic_ack(state, channel, tag, multiple ? 1 : 0)
        if status != AMQP_STATUS_OK.rawValue { throw AMQPError.status(status, operation: "basic.ack") }
    }

    /// Nacks a delivery; `requeue` hands it back to the queue, otherwise it is dead-lettered.
    package func nack(channel: UInt16, tag: UInt64, multiple: Bool = false, requeue: Bool) throws(AMQPError) {
        let status = amqp_basic_nack(state, channel, tag, multiple ? 1 : 0, requeue ? 1 : 0)
        if status != AMQP_STATUS_OK.rawValue { throw AMQPError.status(status, operation: "basic.nack") }
    }

    /// Reads one frame without blocking beyond `timeout` (zero: only what is already there).
    /// Also sends a heartbeat when one is due and detects missed heartbeats from the broker.
    package func readFrame(timeout: Double = 0) throws(AMQPError) -> FrameRead {
        var frame = amqp_frame_t()
        var tv = timeval(seconds: timeout)
        let status = amqp_simple_wait_frame_noblock(state, &frame, &tv)
        if status == AMQP_STATUS_OK.rawValue { return .frame(frame) }
        if status == AMQP_STATUS_TIMEOUT.rawValue { return .none }
        isOpen = false
        throw AMQPError.status(status, operation: "read")
    }

    /// Answers a broker's `channel.close` or `connection.close` with the matching close-ok.
    func sendCloseOk(channel: UInt16, connection: Bool) {
        if connection {
            var ok = amqp_connection_close_ok_t(dummy: 0)
            _ = amqp_send_method(state, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok)
            isOpen = false
        } else {
            var ok = amqp_channel_close_ok_t(dummy: 0)
            _ = amqp_send_method(state, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok)
        }
    }

    /// Frees the memory of frames already handled.
    package func releaseBuffers() { amqp_maybe_release_buffers(state) }

    /// Closes the connection politely (connection.close, waits up to 2 s for close-ok).
    /// - Parameter replyCode: 200, or the AMQP error code that says why (e.g. 505, unexpected frame).
    package func close(replyCode: Int32 = Int32(AMQP_REPLY_SUCCESS)) {
        guard isOpen else { return }
        isOpen = false
        var short = timeval(seconds: 2)
        _ = amqp_set_rpc_timeout(state, &short)
        _ = amqp_connection_close(state, replyCode)
    }
}

extension timeval {
    init(seconds: Double) {
        let whole = seconds.rounded(.down)
        self.init(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
    }
}
