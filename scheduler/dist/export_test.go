package dist

// CtrlTag is the tag of control messages (data transfers of handle id use
// id+1), for tests that watch the messages.
const CtrlTag = ctrlTag

// CheckWindow is the number of submissions the ranks compare at once.
const CheckWindow = checkWindow
