module vmplane/host-agent/simulator

go 1.22
