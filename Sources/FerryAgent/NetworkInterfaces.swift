#if canImport(Glibc)
import Glibc
#endif

/// The machine's IPv4 addresses, for `--interface` and for the listener URLs `serve` prints.
public enum NetworkInterfaces {
    /// Every (interface name, IPv4 address) pair that is up, loopback first.
    public static func ipv4Addresses() -> [(name: String, address: String)] {
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var out: [(String, String)] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let sa = entry.pointee.ifa_addr, sa.pointee.sa_family == sa_family_t(AF_INET),
                  entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(sa, socklen_t(MemoryLayout<sockaddr_in>.size), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            out.append((String(cString: entry.pointee.ifa_name), String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return out.sorted { ($0.1 == "127.0.0.1" ? 0 : 1) < ($1.1 == "127.0.0.1" ? 0 : 1) }
    }

    /// What to bind for `--interface SPEC` and the hosts to print in URLs: nil binds every
    /// interface; an IP address binds it; a name binds that interface's first IPv4 address.
    public static func resolve(_ spec: String?) throws -> (bind: String, hosts: [String]) {
        guard let spec else {
            let hosts = ipv4Addresses().map(\.address)
            return ("0.0.0.0", hosts.isEmpty ? ["127.0.0.1"] : hosts)
        }
        var probe = in_addr()
        if inet_pton(AF_INET, spec, &probe) == 1 {
            // Binding an address the machine does not have fails with a bare EADDRNOTAVAIL.
            // (All of 127.0.0.0/8 is loopback's, though only 127.0.0.1 is listed.)
            let addresses = ipv4Addresses().map(\.address)
            guard spec == "0.0.0.0" || spec.hasPrefix("127.") || addresses.contains(spec) else {
                throw InterfaceError(description: "\(spec) is not an address of this machine (it has \(addresses.joined(separator: ", ")))")
            }
            return (spec, [spec == "0.0.0.0" ? "127.0.0.1" : spec])
        }
        if let match = ipv4Addresses().first(where: { $0.name == spec }) { return (match.address, [match.address]) }
        throw InterfaceError(description: "no IPv4 address or interface named \(spec) on this machine")
    }
}

/// `--interface` named nothing usable.
public struct InterfaceError: Error, CustomStringConvertible {
    /// One sentence.
    public let description: String
}
