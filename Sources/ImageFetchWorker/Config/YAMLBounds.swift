import Foundation
import Yams

/// The bound a YAML `--config` file is held to before the configuration reader sees it.
///
/// The configuration reader walks every alias again where it stands, so ten anchors of ten
/// aliases each are 10^10 values: the start ran at a full core without end. The YAML reader
/// itself shares an anchored node among its aliases, and stops nesting at 1,000 levels.
/// Without aliases a file holds at most one and a half values a byte (`[?,?]`: each `?,` is a
/// mapping, a null key and a null value), so only expanded aliases can pass twice its size.
enum YAMLBounds {
    /// The most values (keys, scalars, collections), aliases expanded, that a file of `bytes`
    /// may hold: twice its size, and never fewer than 10,000.
    static func maxValues(bytes: Int) -> Int { max(10_000, 2 * bytes) }

    /// Why the file of `bytes` whose tree is `root` is refused, or nil.
    static func problem(root: Node, bytes: Int) -> String? {
        let maxValues = maxValues(bytes: bytes)
        var budget = maxValues
        var pending = [root]
        while let node = pending.popLast() {
            budget -= 1
            if budget < 0 {
                return "holds more than \(maxValues) values once its aliases are expanded, past what its size can hold"
            }
            switch node {
            case .mapping(let mapping):
                for (key, value) in mapping {
                    pending.append(key)
                    pending.append(value)
                }
            case .sequence(let sequence):
                pending.append(contentsOf: sequence)
            default:
                break
            }
        }
        return nil
    }
}
