ALTER TABLE `sessions` ADD `auth_proofs` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `assurance_level` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `authenticated_at` integer;