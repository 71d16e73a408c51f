import CRabbitMQ
import CShims

/// A failure talking to the broker. The description names the operation and the reason, never a
/// password or a full URL.
package struct AMQPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure, extensible.
    package struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        /// The TCP or TLS connection could not be made or broke.
        package static let socket = Code(rawValue: "socket")
        /// TLS set-up failed: a certificate file or a verification check.
        package static let tls = Code(rawValue: "tls")
        /// The broker refused the credentials or the virtual host.
        package static let login = Code(rawValue: "login")
        /// The broker closed the channel (for example a declare with other arguments).
        package static let channelClosed = Code(rawValue: "channel_closed")
        /// The broker closed the connection.
        package static let connectionClosed = Code(rawValue: "connection_closed")
        /// No traffic from the broker for two heartbeat intervals.
        package static let heartbeatTimeout = Code(rawValue: "heartbeat_timeout")
        /// An RPC got no answer in time.
        package static let timeout = Code(rawValue: "timeout")
        /// A publish got no confirm within `amqp.confirm_timeout` while the connection was not
        /// blocked; the worker drops the connection.
        package static let confirmTimeout = Code(rawValue: "confirm_timeout")
        /// The broker sent what the protocol does not allow (a delivery tag that does not
        /// increase, a body larger than its header said); the worker drops the connection.
        package static let protocolViolation = Code(rawValue: "protocol_violation")
        /// A message that cannot be encoded: its properties do not fit in a frame, or a short
        /// string (exchange, routing key, a property) is over 255 bytes. Nothing of it was sent,
        /// and the connection is intact: the failure is that message's alone.
        package static let unencodable = Code(rawValue: "unencodable")
        /// The attempt was cut short by the drain (``ConnectInterrupter``).
        package static let interrupted = Code(rawValue: "interrupted")
        /// Anything else rabbitmq-c reported.
        package static let library = Code(rawValue: "library")
    }

    package var code: Code
    /// What the worker was doing, e.g. "queue.declare image-fetch.jobs".
    package var operation: String
    package var message: String
    /// The AMQP reply code when the broker closed something (e.g. 406, 404, 320).
    package var replyCode: UInt16?

    package init(_ code: Code, operation: String, message: String, replyCode: UInt16? = nil) {
        self.code = code
        self.operation = operation
        self.message = message
        self.replyCode = replyCode
    }

    package var description: String {
        if let replyCode { return "\(operation): \(message) (\(code), reply code \(replyCode))" }
        return "\(operation): \(message) (\(code))"
    }

    /// Converts a rabbitmq-c status code.
    static func status(_ status: Int32, operation: String) -> AMQPError {
        let text = amqp_error_string2(status).map { String(cString: $0) } ?? "status \(status)"
        let code: Code
        switch amqp_status_enum(rawValue: status) {
        case AMQP_STATUS_HEARTBEAT_TIMEOUT: code = .heartbeatTimeout
        case AMQP_STATUS_TIMEOUT: code = .timeout
        case AMQP_STATUS_CONNECTION_CLOSED, AMQP_STATUS_SOCKET_ERROR, AMQP_STATUS_SOCKET_CLOSED,
            AMQP_STATUS_TCP_ERROR, AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED:
            code = .socket
        case AMQP_STATUS_SSL_ERROR, AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED,
            AMQP_STATUS_SSL_PEER_VERIFY_FAILED, AMQP_STATUS_SSL_CONNECTION_FAILED,
            AMQP_STATUS_SSL_SET_ENGINE_FAILED:
            code = .tls
        default: code = .library
        }
        return AMQPError(code, operation: operation, message: text)
    }

    /// Converts an RPC reply; nil when it is a normal reply.
    static func reply(_ reply: amqp_rpc_reply_t, operation: String) -> AMQPError? {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return nil
        case AMQP_RESPONSE_NONE:
            return AMQPError(.library, operation: operation, message: "missing RPC reply")
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            return .status(reply.library_error, operation: operation)
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            switch reply.reply.id {
            case AMQP_CONNECTION_CLOSE_METHOD:
                let close = reply.reply.decoded?.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
                let code: Code = close?.reply_code == 403 ? .login : .connectionClosed
                return AMQPError(
                    code, operation: operation,
                    message: close?.reply_text.stringValue ?? "connection closed by the broker",
                    replyCode: close?.reply_code)
            case AMQP_CHANNEL_CLOSE_METHOD:
                let close = reply.reply.decoded?.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
                return AMQPError(
                    .channelClosed, operation: operation,
                    message: close?.reply_text.stringValue ?? "channel closed by the broker",
                    replyCode: close?.reply_code)
            default:
                return AMQPError(.library, operation: operation, message: "unexpected server method \(reply.reply.id)")
            }
        default:
            return AMQPError(.library, operation: operation, message: "unknown reply type")
        }
    }
}
