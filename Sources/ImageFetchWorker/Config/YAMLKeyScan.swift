import Foundation
import Yams

/// Finds a key that a YAML config file gives both nested and dotted (`worker: {concurrency: 8}`
/// and `worker.concurrency: 9`): the configuration reader keeps one of the two values without a
/// word, and an operator who edits the other would see no effect. The YAML parser itself refuses a
/// name repeated within one mapping.
///
/// Runs after the configuration reader accepted the file. Iterative, so a deeply nested file
/// cannot exhaust the stack.
enum YAMLKeyScan {
    /// The first key given twice, dotted (`worker.concurrency`), or nil.
    static func firstDuplicate(in document: Node) -> String? {
        guard let root = document.mapping else { return nil }
        var paths = Set<String>()
        var pending: [(prefix: String, mapping: Node.Mapping)] = [("", root)]
        while let (prefix, mapping) = pending.popLast() {
            for (key, value) in mapping {
                guard let name = key.string else { continue }
                let path = prefix.isEmpty ? name : prefix + "." + name
                if let nested = value.mapping {
                    pending.append((path, nested))
                } else if !paths.insert(path).inserted {
                    return path
                }
            }
        }
        return nil
    }
}
