//! Keeping Mesa's chatter off a program's first screen.
//!
//! Mesa's implicit Vulkan layer `VK_LAYER_MESA_device_select` reorders GPUs by asking the
//! display server, and on a machine without one prints `error: XDG_RUNTIME_DIR is invalid
//! or not set` to stderr each time an instance enumerates devices (four times in a
//! program's first call). polytensor orders adapters itself ([`crate::adapters`]), so the
//! layer adds nothing; its documented switch is the environment variable
//! `NODEVICE_SELECT=1`.
//!
//! The Vulkan loader reads the environment, so that is the only place to say it. Setting a
//! variable while another thread reads the environment is a data race in C (`setenv`
//! against `getenv`), and by the time polytensor makes its instance other threads may be
//! running (a test harness, a PoCL or CUDA driver). So the variable is set before `main`,
//! while the process has one thread: in an ELF `.init_array` constructor, which the dynamic
//! loader runs when it loads the program (or, for a library opened later with `dlopen`,
//! that library). A value the user set, `NODEVICE_SELECT=0` included, is left alone.

/// The constructor; `#[used]` keeps it through linking (rustc keeps the `#[used]` statics
/// of every crate it links).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static QUIET_MESA_DEVICE_SELECT: extern "C" fn() = quiet_mesa_device_select;

/// Set `NODEVICE_SELECT=1` unless the environment has it.
#[cfg(target_os = "linux")]
extern "C" fn quiet_mesa_device_select() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The constructor ran before the test harness (`cargo test` sets no such variable).
    #[test]
    fn the_layer_switch_is_set_before_main() {
        assert!(std::env::var_os("NODEVICE_SELECT").is_some());
    }
}
