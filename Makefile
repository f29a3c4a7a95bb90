# Two entry points; see README.md.
.PHONY: site test

# Install what the collection needs, then run its main job (playbooks/site.yml) on this machine.
site:
	tests/testbed/venv.sh main
	tests/testbed/link-collection.sh
	ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/build/collections .venv/bin/ansible-playbook \
	  -i localhost, -c local -e ansible_python_interpreter=$(CURDIR)/.venv/bin/python \
	  gpufleet.core.site

# Install what the tests need, then run every test stage.
test:
	tests/run.sh
