package dashboard

// CAPIWireNames are the names the Cluster API page reads, for a test that
// holds them equal to controllers/capi's (which this package may not
// import).
var CAPIWireNames = []string{capiConditionFleetAgentReady, capiEnrollLabel, capiUnenrolledAnnotation,
	capiClusterNameAnnotation, capiClusterUIDAnnotation}
