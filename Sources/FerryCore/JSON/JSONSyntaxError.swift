/// Why a text is not valid JSON, and where: 1-based line and column (in Unicode scalars).
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, e.g. "expected ',' or '}'".
    public let message: String
    /// 1-based line of the error.
    public let line: Int
    /// 1-based column of the error, counted in Unicode scalars.
    public let column: Int
    /// Byte offset of the error.
    public let offset: Int

    /// An error at a position.
    public init(message: String, line: Int, column: Int, offset: Int) {
        self.message = message
        self.line = line
        self.column = column
        self.offset = offset
    }

    /// "line L, column C: message".
    public var description: String { "line \(line), column \(column): \(message)" }
}
