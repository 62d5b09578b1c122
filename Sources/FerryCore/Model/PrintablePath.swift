/// A file name as it is printed on one line of `ferry`'s output and the agent's log.
public enum PrintablePath {
    /// `path` itself, or, when it holds a control character (a newline, a tab, an escape),
    /// a JSON string of it: quoted and escaped, so that one name stays one line and a
    /// terminal never runs what it holds. Document ids have none; names `ferry` skips may.
    public static func text(_ path: String) -> String {
        guard path.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return path }
        return JSONValue.string(path).canonicalString
    }
}
