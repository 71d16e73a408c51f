import Configuration
import Foundation

/// The JSON config file's booleans and numbers as the file wrote them.
///
/// `JSONSerialization` hands out `true` and `1` alike as numbers, and the JSON snapshot converts
/// between them on request: `{"amqp": {"prefetch": true}}` ran with a prefetch of 1, and
/// `"declare": 2` read as true. ``ConfigFileProvider`` asks this table first: a boolean is refused
/// for any key but a boolean one, and a number is offered to a boolean key only as its text,
/// which the key's own parser then judges (`1` and `0` pass, as in YAML).
struct JSONLiterals {
    enum Literal: Equatable {
        case boolean
        case number(String)
        /// A list that holds a boolean.
        case listWithBoolean
    }

    /// A boolean where the key takes none.
    struct BooleanRefused: Error {}

    /// By dotted key, as the snapshot encodes it (`worker.concurrency`).
    private(set) var byKey: [String: Literal] = [:]

    init() {}

    /// The literals of a JSON file that the snapshot already accepted; none when it does not
    /// parse here (the snapshot's own error stands then).
    init(data: Data) {
        guard let top = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return }
        // Iterative: a deeply nested file must not exhaust the stack.
        var pending: [(String, Any)] = top.map { ($0.key, $0.value) }
        while let (key, value) = pending.popLast() {
            if let object = value as? [String: Any] {
                pending.append(contentsOf: object.map { (key + "." + $0.key, $0.value) })
            } else if let number = value as? NSNumber {
                byKey[key] = Self.isBoolean(number) ? .boolean : .number(Self.text(number))
            } else if let list = value as? [Any],
                list.contains(where: { ($0 as? NSNumber).map(Self.isBoolean) == true })
            {
                byKey[key] = .listWithBoolean
            }
        }
    }

    /// Foundation makes `true` and `false` instances of its own boolean class.
    private static let booleanClass: AnyClass = type(of: NSNumber(value: true))

    private static func isBoolean(_ number: NSNumber) -> Bool {
        type(of: number) == booleanClass
    }

    /// The number as JSON wrote it, near enough: from its value, not from `description`, whose
    /// formatting is Foundation's to choose (and, on some platforms, the locale's).
    private static func text(_ number: NSNumber) -> String {
        switch String(cString: number.objCType) {
        case "d", "f": String(number.doubleValue)
        case "Q": String(number.uint64Value)
        default: String(number.int64Value)
        }
    }

    /// What the file offers for `key` as `type` when that differs from what the snapshot would
    /// convert it to; nil to ask the snapshot.
    func content(forKey key: String, type: ConfigType) throws(BooleanRefused) -> ConfigContent? {
        switch (byKey[key], type) {
        case (nil, _), (.boolean, .bool), (.listWithBoolean, .boolArray): return nil
        case (.number(let text), .bool): return .string(text)
        case (.number, _): return nil
        case (.boolean, _), (.listWithBoolean, _): throw BooleanRefused()
        }
    }
}
