import Foundation
import Testing
import FerryTesting

/// An agent that merged a large document gives the memory back: the merge's trees are many
/// times the document's size, and glibc's allocator keeps freed pages unless told
/// (`HeapTrim`). Found by an outside test: three agents stayed at 670 MB after merging a
/// 25 MB list.
@Suite struct MemoryReturnTests {
    /// VmRSS and VmHWM of a process, in KiB.
    func memory(_ pid: pid_t) -> (rss: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    @Test func afterMergingALargeListTheAgentGivesItsMemoryBack() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            // 50,000 items: an 8 MB file.
            let made = try FerryProcess.shell("""
                mkdir -p a && python3 -c "
                import json
                d = {'items': [{'name': 'item %d' % i, 'count': i, 'note': 'n' * 80} for i in range(50000)]}
                json.dump(d, open('a/list.json', 'w'), indent=2)
                "
                """, in: tmp.path)
            #expect(made.status == 0, "\(made.stderr)")
            #expect(try FerryProcess.ferry(["init", a, "--name", "stock"]).status == 0)
            #expect(try FerryProcess.ferry(["init", b, "--name", "stock"]).status == 0)
            let listener = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            let url = try #require(listener.url)
            #expect(try FerryProcess.ferry(["sync", url], in: b).status == 0)
            // Each side changes another item; the listener merges the two when B syncs.
            try FerryProcess.shell("sed -i 's/\"count\": 7,/\"count\": -7,/' list.json", in: a)
            try FerryProcess.shell("sed -i 's/\"count\": 49,/\"count\": -49,/' list.json", in: b)
            #expect(try FerryProcess.ferry(["scan"], in: b).status == 0)
            #expect(eventually(10) { RevisionLogReader.lines(a).count == 2 }, "\(listener.log())")
            let sync = try FerryProcess.ferry(["sync", url], in: b)
            #expect(sync.status == 0, "\(sync.stderr)")
            let merged = eventually(10) {
                let text = (try? String(contentsOfFile: a + "/list.json", encoding: .utf8)) ?? ""
                return text.contains("\"count\": -7,") && text.contains("\"count\": -49,")
            }
            #expect(merged, "\(listener.log())")
            // The merge took well over 100 MiB at its peak; a few seconds later most is back.
            let peak = memory(listener.pid).peak
            #expect(peak > 100 << 10, "peak \(peak) KiB")
            let returned = eventually(8) { memory(listener.pid).rss < peak / 2 }
            #expect(returned, "resident \(memory(listener.pid).rss) KiB after a peak of \(peak) KiB")
            listener.stop()
        }
    }
}
