//! The standard process metrics every Prometheus client library exports
//! (<https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics>),
//! read from Linux's `/proc` at each scrape: `prometheus-client` has no
//! collector of its own. Elsewhere (or when `/proc` cannot be read) the
//! metrics are left out, never guessed.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug, Default)]
pub struct ProcessCollector;

/// One reading of this process.
#[derive(Debug, PartialEq)]
struct Reading {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    start_time_seconds: f64,
    open_fds: f64,
    max_fds: Option<f64>,
}

impl Reading {
    fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot_time = std::fs::read_to_string("/proc/stat").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
        // SAFETY: sysconf only reads a system constant.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        parse(
            &stat,
            &boot_time,
            &limits,
            ticks as f64,
            page as f64,
            open_fds,
        )
    }
}

/// `/proc/self/stat` (fields counted after the command's closing
/// parenthesis, which may itself hold spaces), the `btime` of `/proc/stat`
/// and the soft open-files limit of `/proc/self/limits`.
fn parse(
    stat: &str,
    proc_stat: &str,
    limits: &str,
    ticks: f64,
    page: f64,
    open_fds: f64,
) -> Option<Reading> {
    if ticks <= 0.0 || page <= 0.0 {
        return None;
    }
    let after_command = &stat[stat.rfind(')')? + 1..];
    // Field 3 of proc(5) is the first after the command.
    let fields: Vec<&str> = after_command.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let boot_time = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse::<f64>()
        .ok()?;
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse::<f64>().ok());
    Some(Reading {
        cpu_seconds: (field(14)? + field(15)?) / ticks,
        resident_bytes: field(24)? * page,
        virtual_bytes: field(23)?,
        start_time_seconds: boot_time + field(22)? / ticks,
        open_fds,
        max_fds,
    })
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(now) = Reading::now() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(now.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let e = &mut encoder;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            now.resident_bytes,
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            now.virtual_bytes,
        )?;
        gauge(
            e,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            now.start_time_seconds,
        )?;
        gauge(
            e,
            "process_open_fds",
            "Number of open file descriptors",
            now.open_fds,
        )?;
        if let Some(max) = now.max_fds {
            gauge(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_reading_is_parsed_by_field_number() {
        // A command with spaces and a parenthesis, as proc(5) allows.
        let stat = "4242 (dialectic (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    250 150 0 0 20 0 12 0 5000 123456789 2048 18446744073709551615";
        let reading = parse(
            stat,
            "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n",
            "Limit                     Soft Limit           Hard Limit           Units\n\
             Max open files            1024                 524288               files\n",
            100.0,
            4096.0,
            17.0,
        );
        assert_eq!(
            reading,
            Some(Reading {
                cpu_seconds: 4.0,
                resident_bytes: 2048.0 * 4096.0,
                virtual_bytes: 123456789.0,
                start_time_seconds: 1700000050.0,
                open_fds: 17.0,
                max_fds: Some(1024.0),
            })
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read() {
        let now = Reading::now().expect("a reading");
        assert!(now.resident_bytes > 0.0 && now.open_fds >= 3.0, "{now:?}");
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert!(now.start_time_seconds <= epoch + 1.0, "{now:?}");
        assert!(now.start_time_seconds > epoch - 86_400.0, "{now:?}");
    }
}
