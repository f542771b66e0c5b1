package decision

// WorkValue is the work as WorkOrphaning binds it for the rules.
var WorkValue = workValue
