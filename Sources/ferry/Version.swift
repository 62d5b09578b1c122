/// This build's version, as `ferry --version` prints it and the man page names it.
enum FerryVersion {
    /// The version: major 0 while the folder format or the protocols may still change.
    static let current = "0.29.2"
}
