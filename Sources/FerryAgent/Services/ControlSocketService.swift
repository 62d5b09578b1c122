import ServiceLifecycle

/// The control socket `ferry status` asks; removed first at shutdown.
struct ControlSocketService: Service {
    let control: ControlSocket

    func run() async {
        try? await gracefulShutdown()
        control.stop()
    }
}
