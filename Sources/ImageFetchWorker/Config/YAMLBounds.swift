import Foundation
import Yams

/// The bound a YAML `--config` file is held to before the configuration reader sees it.
///
/// The configuration reader walks every alias again where it stands, so ten anchors of ten
/// aliases each are 10^10 values: the start ran at a full core without end. The YAML reader
/// itself shares an anchored node among its aliases, and stops nesting at 1,000 levels.
/// Real configuration files hold a few hundred values.
enum YAMLBounds {
    /// Values (keys, scalars, collections) with every alias expanded.
    static let maxValues = 10_000

    /// Why the file is refused, or nil.
    static func problem(in data: Data) -> String? {
        guard let root = try? Yams.Parser(yaml: data).singleRoot() else { return nil }  // the reader says why
        var budget = maxValues
        var pending = [root]
        while let node = pending.popLast() {
            budget -= 1
            if budget < 0 { return "holds more than \(maxValues) values once its aliases are expanded" }
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
