package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func archiveStatusBody(st archive.Status) wire.ArchiveStatus {
	b := wire.ArchiveStatus{Enabled: st.Enabled, IntervalSeconds: st.Config.Interval.Seconds(), RetentionSeconds: st.Config.Retention.Seconds(),
		ArchiveRetentionSeconds: st.Config.ArchiveRetention.Seconds(), Passes: make([]wire.ArchivePass, 0, len(st.Passes))}
	if st.Enabled && !st.NextRun.IsZero() {
		s := st.NextRun.UTC().Format(wire.TimeFormat)
		b.NextRunAt = &s
	}
	for _, p := range st.Passes {
		b.Passes = append(b.Passes, wire.ArchivePass{StartedAt: p.StartedAt.UTC().Format(wire.TimeFormat), Trigger: p.Trigger,
			ArchiveRun: archiveRunBody(p.Result), Error: p.Err})
	}
	return b
}
