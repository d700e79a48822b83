# AppArmor profile for stockade, for hosts that restrict unprivileged user namespaces
# (kernel.apparmor_restrict_unprivileged_userns = 1: Ubuntu 23.10 and later). Like the `bwrap`
# profile distributions ship, it confines nothing: it only lets stockade create the user
# namespace its sandbox is built in; the sandbox's own layers (Landlock, seccomp, no
# capabilities) do the confining.
#
# Install it for the binary at @STOCKADE@ (`stockade apparmor-profile` prints it with the
# path filled in):
#   stockade apparmor-profile | sudo tee /etc/apparmor.d/stockade
#   sudo apparmor_parser -r /etc/apparmor.d/stockade
# A binary moved elsewhere needs the profile again with its new path.

abi <abi/4.0>,
include <tunables/global>

profile stockade @STOCKADE@ flags=(unconfined) {
  userns,

  # Site-specific additions and overrides.
  include if exists <local/stockade>
}
