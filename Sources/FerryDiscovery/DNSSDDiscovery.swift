import CDNSSD
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// DNS-SD through the system's mDNS daemon (Avahi, via its Bonjour-compatible `dns_sd`
/// library, which reaches avahi-daemon over the D-Bus system bus). Each operation runs on a
/// thread of its own: the library is driven by blocking on its socket and calling
/// `DNSServiceProcessResult`, and its callbacks are C functions that find their state through
/// the context pointer.
public final class DNSSDDiscovery: Discovery {
    /// A discovery; the library's banner about being a compatibility layer is silenced.
    public init() {
        setenv("AVAHI_COMPAT_NOWARN", "1", 0)
    }

    /// Most names tried when the service's name is taken: "NAME", "NAME #2" … "NAME #16".
    static let maxNameAttempts = 16

    /// Registers the service and waits (at most 5 s per name) until the daemon confirms it.
    /// A name another service holds (two folders of one database on one host) is tried again
    /// as "NAME #2", "NAME #3"…, as Bonjour does by itself and Avahi's compatibility layer
    /// does not (it fails with a name conflict); NAME is cut to leave room for the number
    /// (`ServiceAdvertisement.name(_:suffix:within:)`).
    public func advertise(_ service: ServiceAdvertisement) async throws -> Advertisement {
        try await onOwnThread { cancellation in
            for attempt in 1...Self.maxNameAttempts {
                let name = ServiceAdvertisement.name(service.name, suffix: attempt == 1 ? "" : " #\(attempt)")
                switch try Self.register(service, as: name, cancellation) {
                case .registered(let ad): return ad
                case .nameTaken: continue
                }
            }
            throw DiscoveryError("cannot advertise \(service.type): the names \(String(reflecting: service.name)) to \"#\(Self.maxNameAttempts)\" are all taken; choose another with --service-name")
        }
    }

    private enum Registration {
        case registered(DNSSDAdvertisement)
        case nameTaken
    }

    private static func register(_ service: ServiceAdvertisement, as name: String, _ cancellation: Cancellation) throws -> Registration {
        let state = RegisterState()
        var ref: DNSServiceRef?
        let txt = TXTRecord.encode(service.txt)
        let started = txt.withUnsafeBytes { raw in
            DNSServiceRegister(&ref, 0, 0, name, service.type, nil, nil, UInt16(service.port).bigEndian,
                               UInt16(raw.count), raw.baseAddress, registerReply, Unmanaged.passUnretained(state).toOpaque())
        }
        if started == DNSServiceErrorType(kDNSServiceErr_NameConflict) { return .nameTaken }
        guard started == kDNSServiceErr_NoError, let ref else { throw failure(started, "advertise \(service.type)") }
        let finished = process(ref, timeout: 5, cancellation) { state.done }
        if !finished || state.error != nil {
            DNSServiceRefDeallocate(ref)
            if state.error == DNSServiceErrorType(kDNSServiceErr_NameConflict) { return .nameTaken }
            throw finished ? failure(state.error ?? 0, "advertise \(service.type)")
                           : DiscoveryError("the mDNS daemon did not confirm the advertisement of \(service.type) within 5 s", daemonUnavailable: true)
        }
        return .registered(DNSSDAdvertisement(ref: ref, state: state, name: state.name ?? name))
    }

    /// Browses for `timeout`, then resolves every service found (host, port, TXT) and looks
    /// up its IPv4 address (each at most 2 s).
    public func browse(type: String, timeout: Duration) async throws -> [DiscoveredService] {
        try await onOwnThread { cancellation in
            let state = BrowseState()
            var ref: DNSServiceRef?
            let started = DNSServiceBrowse(&ref, 0, 0, type, nil, browseReply, Unmanaged.passUnretained(state).toOpaque())
            guard started == kDNSServiceErr_NoError, let ref else { throw Self.failure(started, "browse \(type)") }
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            _ = Self.process(ref, timeout: seconds, cancellation) { state.error != nil }
            DNSServiceRefDeallocate(ref)
            if let error = state.error { throw Self.failure(error, "browse \(type)") }
            return state.found.compactMap { Self.resolve($0, cancellation) }
        }
    }

    private static func resolve(_ found: BrowseState.Found, _ cancellation: Cancellation) -> DiscoveredService? {
        let state = ResolveState()
        var ref: DNSServiceRef?
        guard DNSServiceResolve(&ref, 0, found.interface, found.name, found.type, found.domain, resolveReply,
                                Unmanaged.passUnretained(state).toOpaque()) == kDNSServiceErr_NoError, let ref else { return nil }
        _ = process(ref, timeout: 2, cancellation) { state.done }
        DNSServiceRefDeallocate(ref)
        guard state.done, state.error == nil, let host = state.host else { return nil }
        let name = host.hasSuffix(".") ? String(host.dropLast()) : host
        return DiscoveredService(name: found.name, type: found.type.hasSuffix(".") ? String(found.type.dropLast()) : found.type,
                                 host: name, address: address(of: host, interface: found.interface, cancellation), port: state.port, txt: state.txt)
    }

    private static func address(of host: String, interface: UInt32, _ cancellation: Cancellation) -> String? {
        let state = AddressState()
        var ref: DNSServiceRef?
        guard DNSServiceQueryRecord(&ref, 0, interface, host, UInt16(kDNSServiceType_A), UInt16(kDNSServiceClass_IN), queryReply,
                                    Unmanaged.passUnretained(state).toOpaque()) == kDNSServiceErr_NoError, let ref else { return nil }
        _ = process(ref, timeout: 2, cancellation) { state.address != nil }
        DNSServiceRefDeallocate(ref)
        return state.address
    }

    /// Feeds the library its socket's replies until `done()`, `timeout` seconds or
    /// cancellation; false unless done.
    static func process(_ ref: DNSServiceRef, timeout: Double, _ cancellation: Cancellation, until done: () -> Bool) -> Bool {
        let fd = DNSServiceRefSockFD(ref)
        let deadline = Date().addingTimeInterval(timeout)
        while !done() {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 || cancellation.isCancelled { return false }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(remaining, 1) * 1000) + 1)
            if ready > 0, DNSServiceProcessResult(ref) != kDNSServiceErr_NoError { return done() }
        }
        return true
    }

    static func failure(_ code: DNSServiceErrorType, _ what: String) -> DiscoveryError {
        if code == DNSServiceErrorType(kDNSServiceErr_Unknown) {
            return DiscoveryError("cannot \(what): no mDNS daemon is reachable (is avahi-daemon running, with D-Bus?); DNS-SD error \(code)",
                                  code: code, daemonUnavailable: true)
        }
        return DiscoveryError("cannot \(what): DNS-SD error \(code)", code: code)
    }

    /// Runs `body` on a thread of its own; cancelling the calling task makes every
    /// `process` loop in it return at its next wake-up (within a second).
    private func onOwnThread<T: Sendable>(_ body: @escaping @Sendable (Cancellation) throws -> T) async throws -> T {
        let cancellation = Cancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let thread = Thread { continuation.resume(with: Result { try body(cancellation) }) }
                thread.name = "ferry-dnssd"
                thread.start()
            }
        } onCancel: {
            cancellation.cancel()
        }
    }
}

/// A registration, kept until withdrawn.
final class DNSSDAdvertisement: Advertisement, @unchecked Sendable {
    private var ref: DNSServiceRef?
    /// The callback's context: it lives as long as the registration does.
    private let state: RegisterState
    private var lost = false
    private let lock = NSLock()
    let registeredName: String

    init(ref: DNSServiceRef, state: RegisterState, name: String) {
        self.ref = ref
        self.state = state
        self.registeredName = name
    }

    /// Reads, without waiting, what the library has queued on its socket since: Avahi's
    /// compatibility layer reports the daemon going away (a stop or a restart, after which
    /// the registration is gone) as an error to the registration's callback.
    var isLost: Bool {
        lock.withLock {
            guard let ref, !lost else { return true }
            state.error = nil
            var p = pollfd(fd: DNSServiceRefSockFD(ref), events: Int16(POLLIN), revents: 0)
            // Each reply read is one the library queued (at most a few); bounded all the same.
            var replies = 0
            while !lost, replies < 16, poll(&p, 1, 0) > 0 {
                replies += 1
                lost = p.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0
                    || DNSServiceProcessResult(ref) != kDNSServiceErr_NoError || state.error != nil
                p.revents = 0
            }
            return lost
        }
    }

    func withdraw() {
        lock.withLock {
            if let ref { DNSServiceRefDeallocate(ref) }
            ref = nil
        }
    }

    deinit { withdraw() }
}

/// Set when the task waiting for a DNS-SD thread is cancelled.
final class Cancellation: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false
    var isCancelled: Bool { lock.withLock { cancelled } }
    func cancel() { lock.withLock { cancelled = true } }
}

// MARK: Callback state (reached through the context pointer)

final class RegisterState {
    var done = false
    var error: DNSServiceErrorType?
    var name: String?
}

final class BrowseState {
    struct Found: Equatable {
        var name: String, type: String, domain: String, interface: UInt32
    }
    var found: [Found] = []
    var error: DNSServiceErrorType?
}

final class ResolveState {
    var done = false
    var error: DNSServiceErrorType?
    var host: String?
    var port = 0
    var txt: [String: String] = [:]
}

final class AddressState {
    var address: String?
}

private let registerReply: DNSServiceRegisterReply = { _, _, error, name, _, _, context in
    let state = Unmanaged<RegisterState>.fromOpaque(context!).takeUnretainedValue()
    state.done = true
    if error != kDNSServiceErr_NoError { state.error = error }
    if let name { state.name = String(cString: name) }
}

private let browseReply: DNSServiceBrowseReply = { _, flags, interface, error, name, type, domain, context in
    let state = Unmanaged<BrowseState>.fromOpaque(context!).takeUnretainedValue()
    guard error == kDNSServiceErr_NoError else { state.error = error; return }
    guard let name, let type, let domain else { return }
    let found = BrowseState.Found(name: String(cString: name), type: String(cString: type), domain: String(cString: domain), interface: interface)
    if flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0 {
        if !state.found.contains(found) { state.found.append(found) }
    } else {
        state.found.removeAll { $0 == found }
    }
}

private let resolveReply: DNSServiceResolveReply = { _, _, _, error, _, host, port, txtLength, txt, context in
    let state = Unmanaged<ResolveState>.fromOpaque(context!).takeUnretainedValue()
    state.done = true
    guard error == kDNSServiceErr_NoError else { state.error = error; return }
    state.host = host.map { String(cString: $0) }
    state.port = Int(UInt16(bigEndian: port))
    if let txt, txtLength > 0 {
        state.txt = TXTRecord.decode(Array(UnsafeRawBufferPointer(start: txt, count: Int(txtLength))))
    }
}

private let queryReply: DNSServiceQueryRecordReply = { _, _, _, error, _, type, _, length, data, _, context in
    let state = Unmanaged<AddressState>.fromOpaque(context!).takeUnretainedValue()
    guard error == kDNSServiceErr_NoError, type == UInt16(kDNSServiceType_A), length == 4, let data else { return }
    let b = data.assumingMemoryBound(to: UInt8.self)
    state.address = "\(b[0]).\(b[1]).\(b[2]).\(b[3])"
}
