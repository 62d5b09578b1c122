import CFerrySystem
import Dispatch
import Synchronization

/// Gives memory back to the system after work on a large JSON document. Parsing, merging and
/// serializing a document of tens of megabytes builds trees many times its size; once they are
/// freed, glibc's allocator keeps the pages, so an agent that merged one such document stayed
/// at hundreds of megabytes for the rest of its life (docs/performance.md). A second after
/// the last large parse or serialization, `malloc_trim` returns what is free. It runs on a
/// background queue, off the path of the edit that caused it, and only once work has paused.
public enum HeapTrim {
    /// Documents at least this large (bytes of JSON text) count as large work.
    public static let threshold = 1 << 20
    /// How long large work must pause before free memory is returned.
    static let quiet = DispatchTimeInterval.seconds(1)
    /// Bumped by each large work; a trim goes ahead only if none came since it was armed.
    private static let latest = Atomic<Int>(0)

    /// Notes work on `bytes` of JSON text: when it is large, arms a trim after `quiet`.
    @inline(__always)
    public static func note(_ bytes: Int) {
        if bytes >= threshold { arm() }
    }

    private static func arm() {
        let mine = latest.add(1, ordering: .relaxed).newValue
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + quiet) {
            guard latest.load(ordering: .relaxed) == mine else { return }
            ferry_heap_trim()
        }
    }
}
