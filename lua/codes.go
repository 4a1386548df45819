package lua

import "strconv"

// Code is q.lua's answer. The values are the script's integer return codes.
type Code int

const (
	CodeOK              Code = 0
	CodeDuplicate       Code = 1
	CodeRequestIDReused Code = 2
	CodeNotFound        Code = 3
	CodeStopped         Code = 4
	CodeNotStarted      Code = 5
	CodeEnded           Code = 6
	CodeSoldOut         Code = 7
	CodeRateLimited     Code = 8
	CodePinLimit        Code = 9
	CodeIPLimit         Code = 10
	CodeTooMany         Code = 11
	// CodeIPPartNeeded: a part said the grab counts the ip nowhere (letter n) but
	// the promotion has an ip limit; the grab must be sent again with an ip part.
	CodeIPPartNeeded Code = 12
	// CodeBucketed: the item's hash is one of another number of buckets than the
	// item said (an ordinary item says one); GrabReply.Buckets is the real count.
	CodeBucketed Code = 13
	// CodeClaimed: a call that claims (GrabCall.Claim) found the requestId's index
	// entry already there; it checked, charged and wrote nothing.
	CodeClaimed Code = 14
	// CodeChannelNotAllowed: the item's promotion is not sold on the grab's
	// channel (or the grab named none and the promotion has channels).
	CodeChannelNotAllowed Code = 15
)

var codeNames = [...]string{"OK", "DUPLICATE", "REQUEST_ID_REUSED", "NOT_FOUND", "STOPPED",
	"NOT_STARTED", "ENDED", "SOLD_OUT", "RATE_LIMITED", "PIN_LIMIT", "IP_LIMIT", "TOO_MANY", "IP_PART_NEEDED", "BUCKETED", "CLAIMED", "CHANNEL_NOT_ALLOWED"}

// String gives the contract name of the code.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// CommitCode is commit.lua's answer.
type CommitCode int

const (
	CommitCommitted CommitCode = 0 // every entry is G
	CommitNotFound  CommitCode = 1 // an entry is missing; nothing changed
	CommitReturned  CommitCode = 2 // an entry was already returned; nothing changed (a conflict)
)

var commitNames = [...]string{"COMMITTED", "NOT_FOUND", "RETURNED"}

func (c CommitCode) String() string {
	if c >= 0 && int(c) < len(commitNames) {
		return commitNames[c]
	}
	return "CommitCode(" + strconv.Itoa(int(c)) + ")"
}

// ReturnCode is return.lua's answer.
type ReturnCode int

const (
	ReturnReturned        ReturnCode = 0 // entries were changed (returned, or finalized); see ReturnReply.Returned
	ReturnAlreadyReturned ReturnCode = 1 // nothing to do for any entry; nothing changed
	ReturnNotFound        ReturnCode = 2 // an entry is missing (not in undo), of another pin or never granted (cancel); nothing changed
	ReturnCommitted       ReturnCode = 3 // undo/abort: an entry is committed; nothing changed
	ReturnPending         ReturnCode = 4 // cancel: an entry is not granted yet (P); nothing changed
)

var returnNames = [...]string{"RETURNED", "ALREADY_RETURNED", "NOT_FOUND", "COMMITTED", "PENDING"}

func (c ReturnCode) String() string {
	if c >= 0 && int(c) < len(returnNames) {
		return returnNames[c]
	}
	return "ReturnCode(" + strconv.Itoa(int(c)) + ")"
}

// AdminCode is the answer of the admin scripts (create, patch, stop, delete); the
// four scripts share these values, so a number means the same thing in each.
type AdminCode int

const (
	AdminOK             AdminCode = 0
	AdminAlreadyApplied AdminCode = 1 // this version is already in Redis; nothing changed
	AdminExists         AdminCode = 2 // create: another version exists; nothing changed
	AdminNotFound       AdminCode = 3
	AdminStale          AdminCode = 4 // Redis holds a newer version; nothing changed
	AdminStopped        AdminCode = 5 // patch of a stopped promotion; nothing changed
	AdminBelowGranted   AdminCode = 6 // patch: new total below granted; nothing changed
	AdminFenced         AdminCode = 7 // the shard is being rebuilt; nothing changed
)

var adminNames = [...]string{"OK", "ALREADY_APPLIED", "EXISTS", "NOT_FOUND", "STALE", "STOPPED", "BELOW_GRANTED", "FENCED"}

func (c AdminCode) String() string {
	if c >= 0 && int(c) < len(adminNames) {
		return adminNames[c]
	}
	return "AdminCode(" + strconv.Itoa(int(c)) + ")"
}
