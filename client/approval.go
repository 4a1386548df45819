package client

// The codes of promo-admin's approval queue (docs/CONTRACT.md, "Approval"): a
// checkout client never meets them, a merchandiser's or approver's tool does.
const (
	CodeApprovalOff      Code = "APPROVAL_OFF"
	CodeSelfApproval     Code = "SELF_APPROVAL"
	CodeProposalDecided  Code = "PROPOSAL_DECIDED"
	CodeProposalApplying Code = "PROPOSAL_APPLYING"
	CodeProposalStale    Code = "PROPOSAL_STALE"
	CodeProposalFailed   Code = "PROPOSAL_FAILED"
	CodeProposalsFull    Code = "PROPOSALS_FULL"
)
