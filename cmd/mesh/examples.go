package main

// An example for every command's --help (issue 16): what a person types
// first. Commands with more to say have their Help beside their Run.

func (c *BackupCmd) Help() string {
	return "Examples:\n  mesh backup /backups/mesh-$(date +%F)"
}
func (c *DeclareCmd) Help() string {
	return "Examples:\n  mesh declare web-1 motd.json --wait 10s   # {\"resources\": [{\"kind\":\"file\",\"path\":\"/etc/motd\",\"mode\":\"0644\",\"content\":\"hi\\n\"}]}"
}
func (c *EventsCmd) Help() string { return "Examples:\n  mesh events\n  mesh events --json | tail" }
func (c *ForeignAckCmd) Help() string {
	return "Examples:\n  mesh foreign ack 42 57   # the SEQ column of mesh foreign list"
}
func (c *ForeignListCmd) Help() string { return "Examples:\n  mesh foreign list" }
func (c *HistoryCmd) Help() string {
	return "Examples:\n  mesh history web-1 --diff\n  mesh history web-1 --since 2h"
}
func (c *ModuleListCmd) Help() string { return "Examples:\n  mesh module list" }
func (c *ModuleRegisterCmd) Help() string {
	return "Examples:\n  mesh module register examples/postgres.json"
}
func (c *ModuleShowCmd) Help() string  { return "Examples:\n  mesh module show postgres" }
func (c *TokenListCmd) Help() string   { return "Examples:\n  mesh token list" }
func (c *TokenRevokeCmd) Help() string { return "Examples:\n  mesh token revoke t0123456789ab" }
func (c *NodeJoinCmd) Help() string {
	return "Examples:\n  mesh node join web-1 > join && chmod 600 join   # then: mesh agent --join-file join"
}
func (c *NodeListCmd) Help() string {
	return "Examples:\n  mesh node list\n  mesh node list --selector zone=eu-1"
}
func (c *NodeRetireCmd) Help() string { return "Examples:\n  mesh node retire web-1" }
func (c *NodeShowCmd) Help() string {
	return "Examples:\n  mesh node show web-1\n  mesh node show web-1 --as-of 1h"
}
func (c *PlanCmd) Help() string {
	return "Examples:\n  mesh plan web-1\n  mesh plan --selector zone=eu-1"
}
func (c *ProjectionsRebuildCmd) Help() string {
	return "Examples:\n  mesh projections rebuild   # fold the read models again from the stream"
}
func (c *ProjectionsStatusCmd) Help() string { return "Examples:\n  mesh projections status" }
func (c *ProjectionsVerifyCmd) Help() string {
	return "Examples:\n  mesh projections verify    # a fresh fold equals the live read models"
}
func (c *ReportRecoveredCmd) Help() string {
	return "Examples:\n  mesh report recovered --provider postgres --machine db-1 --consumer app"
}
func (c *RestoreCmd) Help() string {
	return "Examples:\n  mesh restore /backups/mesh-2026-12-02 --home ./.mesh && mesh up"
}
func (c *UnassignCmd) Help() string { return "Examples:\n  mesh unassign web-1 app" }
func (VersionCmd) Help() string     { return "Examples:\n  mesh version\n  mesh --version" }
func (c *StatusCmd) Help() string {
	return "Examples:\n  mesh status\n  mesh status --json\n  mesh status --watch 2s --selector zone=eu-1\n  mesh status --as-of 1h"
}
