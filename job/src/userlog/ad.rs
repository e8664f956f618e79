//! An event as HTCondor's event ClassAd ([`JobEvent::to_ad`]): what
//! `htcondor2.JobEvent` and the JSON event log show.

use classad::{ClassAd, Value};
use jiff::tz::TimeZone;

use super::text::usage_text;
use super::{
    Completion, CpuUsage, Ending, EventKind, Eviction, ExecErrorType, JobEvent, ResourceUsage,
};

impl JobEvent {
    /// The event as HTCondor's event ClassAd (`ULogEvent::toClassAd`, what
    /// `htcondor2.JobEvent` and the JSON event log show): `MyType` (the event's
    /// name, `SubmitEvent`, ...), `EventTypeNumber`, `EventTime` (ISO, UTC),
    /// `Cluster`, `Proc`, `Subproc`, then the event's own attributes under
    /// HTCondor's names.
    pub fn to_ad(&self) -> ClassAd {
        let mut ad = ClassAd::new();
        let s = |v: &str| Value::string(v);
        let usage = |u: &CpuUsage| {
            let mut t = String::new();
            usage_text(&mut t, u);
            Value::string(t.trim_start_matches('\t'))
        };
        // HTCondor keeps byte counts as reals in the event ad.
        let bytes = |b: u64| Value::Real(b as f64);
        ad.insert_value(classad::name!("MyType"), s(self.kind.class_name()));
        ad.insert_value(
            classad::name!("EventTypeNumber"),
            Value::Int(i64::from(self.kind.number())),
        );
        let t = self.time.to_zoned(TimeZone::UTC);
        ad.insert_value(
            classad::name!("EventTime"),
            s(&t.strftime("%Y-%m-%dT%H:%M:%S").to_string()),
        );
        ad.insert_value(classad::name!("Cluster"), Value::Int(i64::from(self.id.cluster)));
        ad.insert_value(classad::name!("Proc"), Value::Int(i64::from(self.id.proc)));
        ad.insert_value(classad::name!("Subproc"), Value::Int(i64::from(self.id.subproc)));
        let opt = |ad: &mut ClassAd, name: &str, v: &Option<String>| {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                ad.insert_value(name, s(v));
            }
        };
        let ending = |ad: &mut ClassAd, e: &Ending| match e {
            Ending::Normal { return_value } => {
                ad.insert_value(classad::name!("TerminatedNormally"), Value::Bool(true));
                ad.insert_value(
                    classad::name!("ReturnValue"),
                    Value::Int(i64::from(*return_value)),
                );
            }
            Ending::Abnormal { signal, core_file } => {
                ad.insert_value(classad::name!("TerminatedNormally"), Value::Bool(false));
                ad.insert_value(
                    classad::name!("TerminatedBySignal"),
                    Value::Int(i64::from(*signal)),
                );
                if let Some(c) = core_file {
                    ad.insert_value(classad::name!("CoreFile"), s(c));
                }
            }
        };
        let resources = |ad: &mut ClassAd, rs: &[ResourceUsage]| {
            for r in rs {
                let num = |v: f64| {
                    if v.fract() == 0.0 && v.abs() < 9e15 {
                        Value::Int(v as i64)
                    } else {
                        Value::Real(v)
                    }
                };
                if let Some(u) = r.usage {
                    ad.insert_value(format!("{}Usage", r.name).as_str(), Value::Real(u));
                }
                if let Some(q) = r.request {
                    ad.insert_value(format!("Request{}", r.name).as_str(), num(q));
                }
                if let Some(a) = r.allocated {
                    ad.insert_value(r.name.as_str(), num(a));
                }
                if let Some(a) = &r.assigned {
                    ad.insert_value(format!("Assigned{}", r.name).as_str(), s(a));
                }
            }
        };
        match &self.kind {
            EventKind::Submit(e) => {
                ad.insert_value(classad::name!("SubmitHost"), s(&e.submit_host));
                opt(&mut ad, "LogNotes", &e.log_notes);
                opt(&mut ad, "UserNotes", &e.user_notes);
                opt(&mut ad, "Warnings", &e.warnings);
            }
            EventKind::Execute(e) => {
                ad.insert_value(classad::name!("ExecuteHost"), s(&e.execute_host));
                opt(&mut ad, "SlotName", &e.slot_name);
            }
            EventKind::ExecutableError(t) => {
                let n = match t {
                    ExecErrorType::NotExecutable => 0,
                    ExecErrorType::BadLink => 1,
                };
                ad.insert_value(classad::name!("ExecuteErrorType"), Value::Int(n));
            }
            EventKind::Checkpointed(e) => {
                ad.insert_value(classad::name!("RunLocalUsage"), usage(&e.run_local_usage));
                ad.insert_value(classad::name!("RunRemoteUsage"), usage(&e.run_remote_usage));
                ad.insert_value(classad::name!("SentBytes"), bytes(e.sent_bytes));
            }
            EventKind::Evicted(e) => {
                ad.insert_value(
                    "Checkpointed",
                    Value::Bool(matches!(e.eviction, Eviction::Checkpointed)),
                );
                ad.insert_value(classad::name!("RunLocalUsage"), usage(&e.run_local_usage));
                ad.insert_value(classad::name!("RunRemoteUsage"), usage(&e.run_remote_usage));
                ad.insert_value(classad::name!("SentBytes"), bytes(e.sent_bytes));
                ad.insert_value(classad::name!("ReceivedBytes"), bytes(e.received_bytes));
                let requeued = matches!(e.eviction, Eviction::TerminatedAndRequeued(_));
                ad.insert_value(classad::name!("TerminatedAndRequeued"), Value::Bool(requeued));
                if let Eviction::TerminatedAndRequeued(end) = &e.eviction {
                    ending(&mut ad, end);
                }
                opt(&mut ad, "Reason", &e.reason);
                if e.reason_code != 0 {
                    ad.insert_value(
                        classad::name!("ReasonCode"),
                        Value::Int(i64::from(e.reason_code)),
                    );
                    ad.insert_value(
                        classad::name!("ReasonSubCode"),
                        Value::Int(i64::from(e.reason_subcode)),
                    );
                }
                resources(&mut ad, &e.resources);
            }
            EventKind::Terminated(e) => {
                ending(&mut ad, &e.ending);
                ad.insert_value(classad::name!("RunLocalUsage"), usage(&e.run_local_usage));
                ad.insert_value(classad::name!("RunRemoteUsage"), usage(&e.run_remote_usage));
                ad.insert_value(classad::name!("TotalLocalUsage"), usage(&e.total_local_usage));
                ad.insert_value(classad::name!("TotalRemoteUsage"), usage(&e.total_remote_usage));
                ad.insert_value(classad::name!("SentBytes"), bytes(e.sent_bytes));
                ad.insert_value(classad::name!("ReceivedBytes"), bytes(e.received_bytes));
                ad.insert_value(classad::name!("TotalSentBytes"), bytes(e.total_sent_bytes));
                ad.insert_value(
                    classad::name!("TotalReceivedBytes"),
                    bytes(e.total_received_bytes),
                );
                resources(&mut ad, &e.resources);
            }
            EventKind::ImageSize(e) => {
                ad.insert_value(classad::name!("Size"), Value::Int(e.image_size_kb));
                let mut n = |name: &str, v: Option<i64>| {
                    if let Some(v) = v {
                        ad.insert_value(name, Value::Int(v));
                    }
                };
                n("MemoryUsage", e.memory_usage_mb);
                n("ResidentSetSize", e.resident_set_size_kb);
                n("ProportionalSetSize", e.proportional_set_size_kb);
            }
            EventKind::ShadowException(e) => {
                ad.insert_value(classad::name!("Message"), s(&e.message));
                ad.insert_value(classad::name!("SentBytes"), bytes(e.sent_bytes));
                ad.insert_value(classad::name!("ReceivedBytes"), bytes(e.received_bytes));
            }
            EventKind::Generic(info) => ad.insert_value(classad::name!("Info"), s(info)),
            EventKind::Aborted(reason) | EventKind::Released(reason) => {
                opt(&mut ad, "Reason", reason)
            }
            EventKind::Suspended(n) => {
                ad.insert_value(classad::name!("NumberOfPIDs"), Value::Int(i64::from(*n)))
            }
            EventKind::Unsuspended => {}
            EventKind::Held { reason, code, subcode } => {
                opt(&mut ad, "HoldReason", reason);
                ad.insert_value(classad::name!("HoldReasonCode"), Value::Int(i64::from(*code)));
                ad.insert_value(
                    classad::name!("HoldReasonSubCode"),
                    Value::Int(i64::from(*subcode)),
                );
            }
            EventKind::RemoteError(e) => {
                ad.insert_value(classad::name!("Daemon"), s(&e.daemon_name));
                ad.insert_value(classad::name!("ExecuteHost"), s(&e.execute_host));
                ad.insert_value(classad::name!("ErrorMsg"), s(&e.error));
                ad.insert_value(classad::name!("CriticalError"), Value::Bool(e.critical));
                ad.insert_value(
                    classad::name!("HoldReasonCode"),
                    Value::Int(i64::from(e.hold_reason_code)),
                );
                ad.insert_value(
                    classad::name!("HoldReasonSubCode"),
                    Value::Int(i64::from(e.hold_reason_subcode)),
                );
            }
            EventKind::Disconnected(e) => {
                ad.insert_value(classad::name!("DisconnectReason"), s(&e.reason));
                ad.insert_value(classad::name!("StartdAddr"), s(&e.startd_addr));
                ad.insert_value(classad::name!("StartdName"), s(&e.startd_name));
            }
            EventKind::Reconnected(e) => {
                ad.insert_value(classad::name!("StartdName"), s(&e.startd_name));
                ad.insert_value(classad::name!("StartdAddr"), s(&e.startd_addr));
                ad.insert_value(classad::name!("StarterAddr"), s(&e.starter_addr));
            }
            EventKind::ReconnectFailed(e) => {
                ad.insert_value(classad::name!("Reason"), s(&e.reason));
                ad.insert_value(classad::name!("StartdName"), s(&e.startd_name));
            }
            EventKind::JobAdInformation(info) => {
                for (name, expr) in info.iter() {
                    if !ad.contains(name.as_str()) {
                        ad.insert(name.clone(), expr.clone());
                    }
                }
            }
            EventKind::AttributeUpdate(e) => {
                ad.insert_value(classad::name!("Attribute"), s(&e.name));
                ad.insert_value(classad::name!("Value"), s(&e.value));
                opt(&mut ad, "PriorValue", &e.old_value);
            }
            EventKind::ClusterSubmit(e) => {
                ad.insert_value(classad::name!("SubmitHost"), s(&e.submit_host));
                opt(&mut ad, "LogNotes", &e.log_notes);
                opt(&mut ad, "UserNotes", &e.user_notes);
            }
            EventKind::ClusterRemove(e) => {
                ad.insert_value(
                    classad::name!("NextProcId"),
                    Value::Int(i64::from(e.next_proc_id)),
                );
                ad.insert_value(classad::name!("NextRow"), Value::Int(i64::from(e.next_row)));
                let c = match e.completion {
                    Completion::Error(n) => i64::from(n),
                    Completion::Incomplete => 0,
                    Completion::Complete => 1,
                    Completion::Paused => 2,
                };
                ad.insert_value(classad::name!("Completion"), Value::Int(c));
                opt(&mut ad, "Notes", &e.notes);
            }
            EventKind::Other { .. } => {}
        }
        ad
    }
}
