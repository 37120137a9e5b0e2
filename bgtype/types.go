package bgtype

// The task types the runtime gives a record (TaskMeta.Type): a plain task
// (Owner.Spawn) and a sub-agent, which has an inbox of its own
// (Owner.SpawnAgent). WithType names others.
const (
	TypeTask     = "task"
	TypeSubAgent = "sub_agent"
)
