import Configuration
import Foundation

/// The JSON config file's booleans and numbers as the file wrote them.
///
/// `JSONSerialization` hands out `true` and `1` alike as numbers, and the JSON snapshot converts
/// between them on request: `{"amqp": {"prefetch": true}}` ran with a prefetch of 1, and
/// `"declare": 2` read as true. ``ConfigFileProvider`` asks this table first, so that a boolean is
/// offered as a number, or a number as a boolean, only as its text, which the key's own parser
/// then refuses by its own rule (as a YAML file's `prefetch: true` always was).
struct JSONLiterals {
    enum Literal: Equatable {
        case boolean(Bool)
        case number(String)
        /// A list that holds a boolean: its items as text.
        case listWithBoolean([String])
    }

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
                byKey[key] = Self.isBoolean(number) ? .boolean(number.boolValue) : .number(number.description)
            } else if let list = value as? [Any],
                list.contains(where: { ($0 as? NSNumber).map(Self.isBoolean) == true })
            {
                byKey[key] = .listWithBoolean(
                    list.map { item in
                        guard let number = item as? NSNumber else { return (item as? String) ?? "\(item)" }
                        return Self.isBoolean(number) ? (number.boolValue ? "true" : "false") : number.description
                    })
            }
        }
    }

    /// Foundation makes `true` and `false` instances of its own boolean class.
    private static let booleanClass: AnyClass = type(of: NSNumber(value: true))

    private static func isBoolean(_ number: NSNumber) -> Bool {
        type(of: number) == booleanClass
    }

    /// What the file offers for `key` as `type` when that differs from what the snapshot would
    /// convert it to: the literal's text; nil to ask the snapshot.
    func content(forKey key: String, type: ConfigType) -> ConfigContent? {
        switch (byKey[key], type) {
        case (.boolean, .bool), (.listWithBoolean, .boolArray), (nil, _): nil
        case (.boolean(let value), .stringArray), (.boolean(let value), .intArray),
            (.boolean(let value), .doubleArray), (.boolean(let value), .boolArray):
            .stringArray([value ? "true" : "false"])
        case (.boolean(let value), _): .string(value ? "true" : "false")
        case (.number(let text), .bool): .string(text)
        case (.number, _): nil
        case (.listWithBoolean(let items), _): .stringArray(items)
        }
    }
}
