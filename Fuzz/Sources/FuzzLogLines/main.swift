import FerryCore
import FuzzDriver

// Any line: the fast decoder and the general one agree (the fast one may decline), and an
// entry they accept is written back as a line that decodes to the same entry.
runFuzzer { bytes in
    let fast: Result<LogEntry, LogEntryDecodingError>? = bytes.withUnsafeBufferPointer { line in
        do throws(LogEntryDecodingError) {
            guard let entry = try LogEntry.fastDecode(line) else { return nil }
            return .success(entry)
        } catch { return .failure(error) }
    }
    var general: Result<LogEntry, LogEntryDecodingError>?
    if let json = try? JSONParser.parse(bytes) {
        do throws(LogEntryDecodingError) { general = .success(try LogEntry(json: json)) } catch { general = .failure(error) }
    }
    switch (fast, general) {
    case (.success(let a)?, .success(let b)?):
        guard a == b else { fatalError("fast and general decoders disagree on an entry") }
    case (.success?, _):
        fatalError("the fast decoder accepts a line the general one refuses")
    case (.failure?, .success?):
        fatalError("the fast decoder refuses a line the general one accepts")
    default:
        break
    }
    guard case .success(let entry)? = general else { return }
    let line = entry.encodedLine()
    // The fast decoder declines escapes (a time written by hand, say); the general one reads all.
    let reread: LogEntry? = line.withUnsafeBufferPointer { try? LogEntry.fastDecode($0) }
        ?? (try? JSONParser.parse(line)).flatMap { try? LogEntry(json: $0) }
    guard reread == entry else { fatalError("an entry's encoded line does not decode to it") }
}
