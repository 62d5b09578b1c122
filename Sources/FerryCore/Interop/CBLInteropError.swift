/// Why something a Couchbase Lite peer sent (or something ferry would send one) cannot be
/// mapped: an id ferry must not write, a body it cannot represent, a blob with no known alias.
/// `status` is the HTTP-like status answered to the peer.
public struct CBLInteropError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 400 for input ferry refuses; 404 for a blob whose other name is unknown; 422 for a
    /// ferry document Couchbase Lite cannot be given.
    public let status: Int
    /// One sentence.
    public let message: String

    /// An error.
    public init(status: Int = 400, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The sentence.
    public var description: String { message }
}
