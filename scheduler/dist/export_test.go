package dist

// CtrlTag is the tag of control messages (data transfers of handle id use
// id+1), for tests that watch the messages.
const CtrlTag = ctrlTag
