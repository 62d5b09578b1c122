#if canImport(Glibc)
import Glibc
#endif

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The property a fuzz target checks on one input; it traps (`fatalError`) when it does not hold.
nonisolated(unsafe) private var property: (([UInt8]) -> Void)?

/// Hands `check` to libFuzzer with the command line's options and exits with libFuzzer's status.
/// The target's main file calls it (libFuzzer then owns the process).
public func runFuzzer(_ check: @escaping ([UInt8]) -> Void) -> Never {
    property = check
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzerTestOneInput))
}

/// libFuzzer's own `main` (linked in by `-sanitize=fuzzer`) names this entry point; the
/// target's `main`, which the package manager's link makes the program's, runs first and goes
/// through `LLVMFuzzerRunDriver` instead, so this only forwards.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let property else { fatalError("runFuzzer was not called: libFuzzer's main ran instead of the target's") }
    property(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
