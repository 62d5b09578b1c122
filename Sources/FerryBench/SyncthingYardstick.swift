// Syncthing as a yardstick for the bulk syncs of `ferry-bench --scale`: two instances on
// 127.0.0.1 sharing one folder, timed from the empty side's start until it holds every file.
import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Two Syncthing instances on loopback, the first sharing `source`, the second receiving it
/// into `target`; nil when Syncthing is not installed (`apt-get install syncthing`).
final class SyncthingPair {
    static let program = "/usr/bin/syncthing"
    /// The one folder both share.
    static let folderID = "bench"
    static let apiKey = "ferry-bench"

    private let homes: [String]
    private let ports: [(sync: Int, gui: Int)] = [(47_411, 47_412), (47_413, 47_414)]
    private var instances: [Process] = []
    private let source: String

    init?(source: String, target: String, work: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.program) else { return nil }
        self.source = source
        homes = [work + "/syncthing-source", work + "/syncthing-target"]
        var ids: [String] = []
        for home in homes {
            let run = try measure("/usr/bin/env", ["STNODEFAULTFOLDER=1", Self.program, "generate", "--home=\(home)"])
            guard let line = run.output.split(separator: "\n").first(where: { $0.contains("Device ID: ") }) else {
                throw CocoaError(.fileReadUnknown, userInfo: ["syncthing generate": run.output])
            }
            ids.append(String(line.split(separator: " ").last!))
        }
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        // ferry's own state is not part of the folder's content.
        try Data("/.ferry\n".utf8).write(to: URL(fileURLWithPath: source + "/.stignore"))
        for (i, home) in homes.enumerated() {
            try config(path: i == 0 ? source : target, ids: ids, own: i).write(toFile: home + "/config.xml", atomically: true, encoding: .utf8)
        }
    }

    /// The configuration of instance `own`: no discovery, relays or NAT, no compression (as
    /// ferry on loopback), both devices at fixed loopback ports, the REST API on its own port.
    private func config(path: String, ids: [String], own: Int) -> String {
        let devices = ids.enumerated().map { i, id in
            "<device id=\"\(id)\" name=\"n\(i)\" compression=\"never\" introducer=\"false\"><address>tcp://127.0.0.1:\(ports[i].sync)</address></device>"
        }.joined(separator: "\n")
        return """
        <configuration version="36">
        <folder id="\(Self.folderID)" label="bench" path="\(path)" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="false">
        \(ids.map { "<device id=\"\($0)\"></device>" }.joined())
        </folder>
        \(devices)
        <gui enabled="true" tls="false"><address>127.0.0.1:\(ports[own].gui)</address><apikey>\(Self.apiKey)</apikey></gui>
        <options>
        <listenAddress>tcp://127.0.0.1:\(ports[own].sync)</listenAddress>
        <globalAnnounceEnabled>false</globalAnnounceEnabled><localAnnounceEnabled>false</localAnnounceEnabled>
        <relaysEnabled>false</relaysEnabled><natEnabled>false</natEnabled><startBrowser>false</startBrowser>
        <urAccepted>-1</urAccepted><crashReportingEnabled>false</crashReportingEnabled><autoUpgradeIntervalH>0</autoUpgradeIntervalH>
        </options>
        </configuration>
        """
    }

    private func start(_ i: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.program)
        process.arguments = ["serve", "--home=\(homes[i])", "--no-browser", "--no-restart", "--logfile=-"]
        // STMONITORED: run as the syncing process itself, not as a monitor that starts it as a
        // child (whose memory would not be the one measured).
        process.environment = ["STNOUPGRADE": "1", "STMONITORED": "yes", "HOME": homes[i], "PATH": "/usr/bin:/bin"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        instances.append(process)
    }

    /// The folder's status as instance `i` reports it (nil while its API is not up).
    private func status(_ i: Int) -> JSONValue? {
        guard let run = try? measure("/usr/bin/curl", ["-s", "-m", "2", "-H", "X-API-Key: \(Self.apiKey)",
                                                        "http://127.0.0.1:\(ports[i].gui)/rest/db/status?folder=\(Self.folderID)"]),
              run.status == 0 else { return nil }
        return try? JSONParser.parse(Array(run.output.utf8))
    }

    /// Polls instance `i` until its folder is idle with `files` files and nothing needed
    /// (at most `timeout` seconds); the seconds it took, nil on a timeout.
    private func waitUntilHolding(_ i: Int, files: Int, timeout: Double) -> Double? {
        let started = Date()
        for _ in 0..<Int(timeout / 0.05) where instances[i].isRunning {
            if let s = status(i), s["state"] == .string("idle"), s["localFiles"] == .int(files), s["needFiles"] == .int(0) {
                return Date().timeIntervalSince(started)
            }
            usleep(50_000)
        }
        return nil
    }

    /// Starts the source and waits for its scan of `files` files, then starts the target and
    /// times it until it holds them all; returns the seconds and both instances' peak RSS.
    func sync(files: Int, timeout: Double = 600) throws -> (seconds: Double, sourceKiB: Int, targetKiB: Int)? {
        try start(0)
        guard waitUntilHolding(0, files: files, timeout: timeout) != nil else { return nil }
        try settle(warming: source)
        try start(1)
        guard let seconds = waitUntilHolding(1, files: files, timeout: timeout) else { return nil }
        return (seconds, highWaterRSS(instances[0].processIdentifier), highWaterRSS(instances[1].processIdentifier))
    }

    /// Stops both instances and removes their state and the marks they left in the folders.
    func stop() {
        for p in instances where p.isRunning {
            p.terminate()
            p.waitUntilExit()
        }
        instances.removeAll()
        for home in homes { try? FileManager.default.removeItem(atPath: home) }
        try? FileManager.default.removeItem(atPath: source + "/.stignore")
        try? FileManager.default.removeItem(atPath: source + "/.stfolder")
    }

    deinit { stop() }
}

/// Syncthing's time for the same initial sync, as printed beside ferry's figure.
func versusSyncthing(source: String, target: String, files: Int, ferrySeconds: Double) throws -> String {
    guard let pair = try SyncthingPair(source: source, target: target, work: work) else {
        return "   [Syncthing: not installed]"
    }
    defer {
        pair.stop()
        try? FileManager.default.removeItem(atPath: target)
    }
    guard let run = try pair.sync(files: files) else { return "   [Syncthing: did not finish]" }
    return String(format: "   [Syncthing %.2f s, peak RSS %@ / %@; ferry/Syncthing %.2f]",
                  run.seconds, mib(run.sourceKiB), mib(run.targetKiB), ferrySeconds / run.seconds)
}

/// How many regular files `folder` holds, in every directory but `.ferry`, `.stignore` aside
/// (what Syncthing counts as the folder's files).
func regularFileCount(in folder: String) throws -> Int {
    guard let walk = FileManager.default.enumerator(atPath: folder) else { throw CocoaError(.fileReadNoSuchFile) }
    var count = 0
    for case let relative as String in walk {
        if relative == ".ferry" {
            walk.skipDescendants()
        } else if relative != ".stignore", walk.fileAttributes?[.type] as? FileAttributeType == .typeRegular {
            count += 1
        }
    }
    return count
}
