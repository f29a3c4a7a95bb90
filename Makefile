# Entry points; see README.md.
.PHONY: site test lab-up lab-down

# Bring up the local lab of simulated GPU hosts (systemd containers reached over SSH, tests/lab/) and run the example
# fleet's site playbook (examples/hk-fleet) against it: validate, preflight, rollout, summary with each host's audit.
site: lab-up
	cd examples/hk-fleet && ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/build/collections:$$($(CURDIR)/.venv/bin/python -c \
	  'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	  $(CURDIR)/.venv/bin/ansible-playbook -i $(CURDIR)/build/lab/inventory site.yml

# Install what the lab needs and start it (idempotent; a few seconds when it is already up).
lab-up:
	tests/testbed/venv.sh site
	tests/testbed/link-collection.sh
	tests/lab/lab.sh up

# Remove the lab: its containers, its network and build/lab.
lab-down:
	tests/lab/lab.sh down

# Install what the tests need, then run every test stage.
test:
	tests/run.sh
