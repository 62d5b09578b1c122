import ArgumentParser
import FerryCore
import FerryDiscovery
import Foundation

/// `ferry peers`: what DNS-SD finds on the network.
struct PeersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "Browse DNS-SD and print each peer: name, host, address, port, URL, TLS fingerprint.",
        discussion: "Needs a running mDNS daemon (avahi-daemon); without one it says so and exits 1.")

    @Option(help: ArgumentHelp("Seconds to browse.", valueName: "seconds"))
    var timeout: Double = 3

    @Option(help: ArgumentHelp("DNS-SD service type.", valueName: "type"))
    var serviceType = "_cblistservicesync._tcp"

    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout must be between 0 and 600 seconds") }
    }

    func run() async throws {
        let services: [DiscoveredService]
        do {
            services = try await DNSSDDiscovery().browse(type: serviceType, timeout: .milliseconds(Int(timeout * 1000)))
        } catch {
            throw CLIError("cannot browse for peers: \(error)")
        }
        let rows = services.sorted { $0.name < $1.name }.map { s -> [String: JSONValue] in
            let db = s.txt["db"] ?? ""
            var row: [String: JSONValue] = [
                "name": .string(s.name), "host": .string(s.host), "address": s.address.map { .string($0) } ?? .null,
                "port": .int(s.port), "url": s.url.map { .string($0) } ?? .null,
                "fingerprint": (s.txt["fp"] ?? "").isEmpty ? .null : .string(s.txt["fp"]!), "database": .string(db),
            ]
            if let v = s.txt["v"] { row["version"] = .string(v) }
            return row
        }
        if output.json {
            printJSON(.array(rows.map { .object($0) }))
            return
        }
        if rows.isEmpty { print("no peers found (\(serviceType), \(timeout) s)") }
        for r in rows {
            print("\(r["name"]?.stringValue ?? "")\thost \(r["host"]?.stringValue ?? "")\taddress \(r["address"]?.stringValue ?? "-")\tport \(r["port"]?.intValue ?? 0)")
            print("    url \(r["url"]?.stringValue ?? "-")\tsha256 \(r["fingerprint"]?.stringValue ?? "- (no TLS)")")
        }
    }
}
