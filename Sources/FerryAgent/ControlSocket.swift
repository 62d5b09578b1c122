import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The agent's local control socket, `.ferry/agent.sock` (a Unix socket, mode 0600): a
/// client writes one line naming a request (`status`) and reads one JSON answer until the
/// agent closes the connection. `ferry status` asks the running agent through it.
///
/// One dedicated thread accepts and answers: a request is a snapshot read under locks, so
/// there is nothing to await, and the blocking `accept` stays off the cooperative pool.
public final class ControlSocket: @unchecked Sendable {
    /// The socket's path.
    public let path: String
    private let fd: Int32
    private let answer: @Sendable (String) -> [UInt8]
    private let thread: Thread?
    private let stopped = NSLock()
    private var isStopped = false

    /// Binds `path` (replacing a stale socket) and starts answering with `answer(request)`.
    public init(path: String, answer: @escaping @Sendable (String) -> [UInt8]) throws {
        self.path = path
        self.answer = answer
        guard path.utf8.count < 108 else {
            throw ControlSocketError("the control socket path \(path) is longer than a Unix socket allows (107 bytes)")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError("cannot create the control socket: \(String(cString: strerror(errno)))") }
        unlink(path)  // a socket left by a killed agent; the folder lock proves no agent owns it
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ControlSocketError("cannot listen on \(path): \(reason)")
        }
        self.fd = fd
        let box = AcceptLoop(fd: fd, answer: answer)
        let thread = Thread { box.run() }
        thread.name = "ferry-control"
        self.thread = thread
        thread.start()
    }

    /// Stops answering and removes the socket file.
    public func stop() {
        let first = stopped.withLock { () -> Bool in
            defer { isStopped = true }
            return !isStopped
        }
        guard first else { return }
        unlink(path)
        shutdown(fd, Int32(SHUT_RDWR))  // wakes the thread blocked in accept
    }

    deinit { stop() }

    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Asks the agent listening on `path`; nil when no agent answers (within two seconds).
    public static func ask(_ request: String, path: String) -> [UInt8]? {
        guard path.utf8.count < 108 else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }
        let line = Array((request + "\n").utf8)
        guard line.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == line.count else { return nil }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while out.count < 16 << 20 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return n == 0 ? out : nil }
            out += buffer[0..<n]
        }
        return nil
    }
}

/// Why the control socket could not be opened.
public struct ControlSocketError: Error, CustomStringConvertible {
    /// One sentence.
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The accept loop, on its own thread.
private final class AcceptLoop: @unchecked Sendable {
    let fd: Int32
    let answer: @Sendable (String) -> [UInt8]

    init(fd: Int32, answer: @escaping @Sendable (String) -> [UInt8]) {
        self.fd = fd
        self.answer = answer
    }

    func run() {
        defer { close(fd) }
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // shut down
            }
            serve(client)
            close(client)
        }
    }

    private func serve(_ client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 256, read(client, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let reply = answer(String(decoding: line, as: UTF8.self))
        var sent = 0
        while sent < reply.count {
            let n = reply[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            sent += n
        }
    }
}
